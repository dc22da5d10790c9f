"""The audit gate: an image without kernels for a target GPU fails here, before its smoke step."""

from __future__ import annotations

import time

from envbuild._util.record import TYPE_CHECKING
from envbuild.image.auditgate import audit_gate, summary
from envbuild.resolve.query import parse_gpu

if TYPE_CHECKING:
    from envbuild.image.auditgate import Gate
    from envbuild.plan.plan import Plan
    from envbuild.stages.target import RecordFile, TargetRun


def run(build: TargetRun, record: RecordFile, plan: Plan, image_id: str) -> Gate:
    """The gate's verdict, in the record; raises its error when it failed."""
    started = time.perf_counter()
    record.update(status="auditing")
    gpus = tuple(parse_gpu(text, build.matrix) for text in build.target.stack.gpus)
    # the wheels the build installed give a duplicated CUDA library's wheel copy its version
    wheels = {str(d["name"]): str(d["version"]) for d in record.current.dependencies or ()}
    gate = audit_gate(
        image_id,
        gpus,
        plan.stack_document["framework"],
        build.target.name,
        skip=build.settings.skip_audit,  # the spec's [audit] skip, the flags' on top
        say=build.tell,
        wheels=wheels,
    )
    record.update(audit=gate.document)
    record.stage_done("audit", started, ok=gate.error is None)
    for line in summary(gate).splitlines():
        build.tell(line)
    gate.check()
    return gate
