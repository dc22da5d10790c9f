"""The verify stage: the smoke training step, run in the untagged image on the target's device."""

from __future__ import annotations

import time

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import EnvbuildError
from envbuild.image.verify import report_digest, report_document, verify_image

if TYPE_CHECKING:
    from envbuild.image.verify import Verification
    from envbuild.plan.plan import Plan
    from envbuild.stages.target import RecordFile, TargetRun


def run(build: TargetRun, record: RecordFile, plan: Plan, image_id: str) -> Verification:
    """The passing verification, in the record; an EnvbuildError naming every failed gate (the image
    stays untagged) when it did not pass."""
    started = time.perf_counter()
    record.update(status="verifying")
    smoke, device = build.spec.smoke, build.smoke_device
    verification = verify_image(
        image_id,
        device=device,
        steps=smoke.steps,
        precision=smoke.precision,
        timeout=smoke.timeout,
        # the image carries these (smoke_checks.json); asked for too, so the report must show each
        imports=smoke.imports or None,
        command=smoke.command,
        say=build.tell,
        gpu_access=build.settings.gpu_access,
    )
    record.update(
        smoke=verification.report,
        # what `verify --report` would write, and the promoted image's label carries
        report_digest=report_digest(report_document(verification.image_id, device, verification.report)),
    )
    record.stage_done("verify", started, passed=verification.passed, device=device)
    if verification.report.get("preflight"):
        build.tell(verification.report["preflight"]["summary"])
    if not verification.passed:
        failed = "; ".join(
            f"{f['gate']}: {f['detail']} (hint: {f['hint']})" for f in verification.report.get("failed", [])
        )
        raise EnvbuildError(
            f"{build.target.name}: the smoke step failed on {device}: {failed}",
            fix="the image was not tagged; fix the cause and build again",
        )
    build.tell(
        f"smoke step passed on {device} "
        f"({verification.report.get('throughput_samples_per_s')} samples/s"
        + (f", {plan.platform} emulated" if verification.emulated else "")
        + ")"
    )
    return verification
