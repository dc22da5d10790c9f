"""The smoke step's precision on each GPU of a target: the warning, and what a verify job passes.

A target whose `[smoke] precision` one of its GPUs lacks (bf16 on a Pascal P100 or GTX 1080 Ti, fp16
on a 5.2 Maxwell) would fail its smoke step on that GPU for a reason that is not the image's. resolve
and render warn, naming the GPU, its capability, the precision and what its verify job uses instead;
each CI verify job (scaleout/ciplan.py, k8s.py, slurm.py) passes that precision to the smoke step.
The rule itself is the smoke program's own (smoke_common.effective_precision), fed with the GPU rows'
bf16/fp16 (matrix/gpufeatures.py), so envbuild and the program in the image cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.matrix.model import Gpu, Matrix, gpu_index
from envbuild.matrix.versions import format_cc
from envbuild.resolve.query import parse_gpu
from envbuild.smoke import effective_precision

if TYPE_CHECKING:
    from typing import Any

    from envbuild.spec.model import SmokeSpec


class PrecisionWarning(Record):
    """One GPU of a target that lacks the spec's smoke precision; `verify_precision` is what its
    verify job's smoke step trains in instead."""

    __slots__ = ("gpu", "cc", "precision", "verify_precision", "message", "fix")
    gpu: str  # the GPU row's name (a capability stand-in's is sm_XY)
    cc: tuple[int, int]
    precision: str  # the spec's [smoke] precision
    verify_precision: str
    message: str
    fix: str


def gpus_precision(precision: str, gpus: Iterable[Gpu]) -> str:
    """The precision a smoke step in `precision` trains in on any of `gpus` (none: `precision`):
    the nearest format every one of them has."""
    gpus = tuple(gpus)
    return effective_precision(
        precision, on_gpu=True, bf16=all(g.bf16 for g in gpus), fp16=all(g.fp16 for g in gpus)
    )


def target_precision(matrix: Matrix, smoke: SmokeSpec, names: Iterable[str]) -> str:
    """What a verify job on any of the GPUs `names` (as a spec or a flag names them) passes as the
    smoke step's precision: the spec's on the CPU (the program's own CPU rule applies there), else the
    nearest format all of them have. For a job that may land on any GPU of a target (a Slurm
    partition, a Kubernetes Job with no GPU product): every GPU of it."""
    if smoke.device != "gpu":
        return smoke.precision
    index = gpu_index(matrix)
    return gpus_precision(smoke.precision, [parse_gpu(name, matrix, index) for name in names])


def precision_warnings(smoke: SmokeSpec, gpus: Iterable[Gpu], where: str) -> tuple[PrecisionWarning, ...]:
    """A warning per GPU of a target that lacks `smoke.precision`; none when the smoke step runs on
    the CPU (then no GPU computes it). `where` ("envbuild.toml target 'lab'") starts each message."""
    if smoke.device != "gpu":
        return ()
    gpus = tuple({gpu.name: gpu for gpu in gpus}.values())
    common = gpus_precision(smoke.precision, gpus)
    warnings = []
    for gpu in gpus:
        instead = gpus_precision(smoke.precision, (gpu,))
        if instead == smoke.precision:
            continue
        others = f'set precision = "{common}" in [smoke] (every GPU of the target has it)'
        warnings.append(
            PrecisionWarning(
                gpu=gpu.name,
                cc=gpu.cc,
                precision=smoke.precision,
                verify_precision=instead,
                message=f'{where}: [smoke] precision = "{smoke.precision}", but {gpu.name} (compute '
                f"capability {format_cc(gpu.cc)}) has no {smoke.precision}: its verify job runs the smoke "
                f"step in {instead} instead",
                fix=f"{others}, or take {gpu.name} out of gpus"
                if len(gpus) > 1
                else f'set precision = "{instead}" in [smoke], or build the target for a GPU with '
                f"{smoke.precision}",
            )
        )
    return tuple(warnings)


def warning_json(warning: PrecisionWarning) -> dict[str, Any]:
    return {
        "gpu": warning.gpu,
        "compute_capability": format_cc(warning.cc),
        "precision": warning.precision,
        "verify_precision": warning.verify_precision,
        "message": warning.message,
        "fix": warning.fix,
    }


def warning_text(warning: PrecisionWarning) -> str:
    """The lines after "warning: " on stderr, in the shape of every other warning with a fix."""
    return f"{warning.message}\n  fix: {warning.fix}"
