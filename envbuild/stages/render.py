"""The render stage: the target's plan, checked against its lock entry, written as its context."""

from __future__ import annotations

import time

from envbuild._util.record import TYPE_CHECKING
from envbuild.attest import inputs as attest_inputs
from envbuild.engine import current_engine
from envbuild.image import builder as image_builder
from envbuild.image.platforms import require_buildable
from envbuild.lockfile.model import lock_path
from envbuild.plan.lockmatch import require_match
from envbuild.plan.plan import build_plan
from envbuild.render.context import from_bundle, render_files, write_context

if TYPE_CHECKING:
    from envbuild.plan.plan import Plan
    from envbuild.stages.target import RecordFile, TargetRun


def run(build: TargetRun, record: RecordFile) -> tuple[Plan, str]:
    """The plan and the build backend it was rendered for (BuildKit, the Engine API or podman)."""
    started = time.perf_counter()
    settings, spec = build.settings, build.spec
    backend = image_builder.choose_backend(settings.builder)
    plan = build_plan(
        build.matrix,
        spec,
        build.target,
        base_image=settings.base_image,
        wheelhouse=settings.wheelhouse is not None,
        lock=build.lock,
        buildkit=image_builder.runs_mounts(backend),
        platform=build.platform,
    )
    if build.lock is not None:
        require_match(build.lock, plan, lock_path(spec.path))
    rendered = plan
    if settings.bundle is not None:  # FROM the base loaded from the bundle, under its local tag
        from envbuild.image.bundlebase import load_base

        load_base(settings.bundle, plan.base_image)
        rendered = from_bundle(plan)
    files = render_files(rendered)
    write_context(files, build.out_dir, build.context, wheelhouse=settings.wheelhouse, plan=plan)
    record.update(
        stack=plan.stack_document,
        engine=current_engine().version(),
        backend=backend,
        platform=plan.platform,
    )
    record.update(**attest_inputs.record_inputs(spec, plan, build.lock, build.context_dir))
    record.stage_done("render", started, context=build.context_dir)
    require_buildable(plan.platform, build.smoke_device)  # before a long emulated build that cannot pass
    build.tell(
        f"rendered {plan.stack_document['framework']} "
        f"{plan.stack_document['framework_version']} ({plan.strategy}, {backend}) in {build.context_dir}"
    )
    return plan, backend
