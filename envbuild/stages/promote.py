"""The promote stage: the verified image labelled, tagged with the plan's tags, and pushed."""

from __future__ import annotations

import time

from envbuild._util.record import TYPE_CHECKING
from envbuild.image.promote import promote

if TYPE_CHECKING:
    from envbuild.image.auditgate import Gate
    from envbuild.image.promote import Promotion
    from envbuild.image.verify import Verification
    from envbuild.plan.plan import Plan
    from envbuild.stages.target import RecordFile, TargetRun


def run(
    build: TargetRun, record: RecordFile, plan: Plan, image_id: str, verification: Verification, gate: Gate
) -> Promotion:
    started = time.perf_counter()
    record.update(status="promoting")
    device = build.smoke_device
    promotion = promote(
        image_id,
        tags=list(plan.tags),
        report=verification.report,
        device=device,
        push=build.settings.push,
        labels=gate.labels,
        say=build.tell,
    )
    record.update(
        images={"built": record.current.images.built, "promoted": promotion.image_id},
        tags=list(promotion.tags),
        pushed=[{"tag": tag, "digest": digest} for tag, digest in promotion.pushed],
    )
    record.stage_done("promote", started, pushed=build.settings.push)
    for tag in promotion.tags:
        build.tell(f"tagged {tag}" + (" (verified on CPU only)" if device == "cpu" else ""))
    for tag, digest in promotion.pushed:
        build.tell(f"pushed {tag}@{digest}")
    return promotion
