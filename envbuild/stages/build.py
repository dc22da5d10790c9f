"""The build stage: the rendered context built into an untagged image, for the plan's platform."""

from __future__ import annotations

import os
import time

from envbuild._util.record import TYPE_CHECKING
from envbuild.image import builder as image_builder

if TYPE_CHECKING:
    from envbuild.image.builder import BuildResult
    from envbuild.plan.plan import Plan
    from envbuild.stages.target import RecordFile, TargetRun


def run(build: TargetRun, record: RecordFile, plan: Plan, backend: str) -> BuildResult:
    started = time.perf_counter()
    result = image_builder.build_image(
        build.context_dir,
        backend=backend,
        no_cache=build.settings.no_cache,
        log_path=os.path.join(build.context_dir, "build.log"),
        progress=build.progress or image_builder.Progress(),
        platform=plan.platform,  # asked of the builder, and checked on the image it made
    )
    record.update(images={"built": result.image_id})
    record.stage_done("build", started, steps=result.steps)
    build.tell(f"built {result.image_id[:19]} in {result.seconds:.1f}s (untagged)")
    return result
