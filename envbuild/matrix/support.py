"""Which drivers can drive a GPU, and which GPUs of the matrix a compute capability stands for.

A GPU has a first driver branch and maybe a last one. The first is derived, never stored: the branch
of the minimum driver of the GA release of the GPU's `first_cuda` (B200: CUDA 12.8 -> 570.26 ->
R570), because NVIDIA ships support for a new architecture with the CUDA release that introduces it.
The last is `max_driver_branch` (K80: R470). Resolve turns a miss into a host-level problem and
doctor into a failed check; both ask `unsupported` here, so the two can never disagree.
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.model import CudaRelease, Gpu, Matrix, Provenance
from envbuild.matrix.versions import Driver, format_cc, format_minor, sm_name


class DriverFloor(Record):
    """The oldest driver branch that drives a GPU, and the CUDA release it comes from."""

    __slots__ = ("cuda", "release")
    cuda: tuple[int, int]  # the GPU's first_cuda
    release: CudaRelease | None  # its GA row; None: newer than every CUDA with a known driver

    @property
    def branch(self) -> int | None:
        return self.release.min_driver[0] if self.release and self.release.min_driver else None


class Unsupported(Record):
    """Why a driver cannot drive a GPU, and the driver that would."""

    __slots__ = ("text", "fix")
    text: str
    fix: str


def first_driver(matrix: Matrix, gpu: Gpu) -> DriverFloor | None:
    """The GPU's driver floor; None when its first CUDA is older than every CUDA the matrix knows.

    A first_cuda that is not itself a GA release with a known driver (a matrix `check` refuses that)
    takes the next one that is: minimum drivers never go down as CUDA goes up, so the floor can only
    be too strict, never too lax.
    """
    known = sorted(m for m, row in matrix.ga_floor.items() if row.min_driver)
    if not known or gpu.first_cuda < known[0]:
        return None
    later = [m for m in known if m >= gpu.first_cuda]
    return DriverFloor(cuda=gpu.first_cuda, release=matrix.ga_floor[later[0]] if later else None)


def unsupported(matrix: Matrix, gpu: Gpu, driver: Driver) -> Unsupported | None:
    """Whether `driver` is of a branch older than the GPU's first or newer than its last.

    Branches, not full versions, are compared: a driver branch gains a GPU in its first release, and
    `--driver 570` means a current R570 driver. Minor-version compatibility never enters into it: it
    lets a driver run newer CUDA, not drive newer GPUs.
    """
    floor = first_driver(matrix, gpu)
    if floor is not None and (floor.branch is None or driver.branch < floor.branch):
        what = (
            f"{gpu.architecture}, compute capability {format_cc(gpu.cc)}"
            if gpu.architecture
            else (f"compute capability {format_cc(gpu.cc)}")
        )
        if floor.branch is None:
            return Unsupported(
                text=f"driver {driver} does not support {gpu.name} ({what}: needs CUDA "
                f"{format_minor(floor.cuda)}, which no driver in the matrix is known to run)",
                fix="update envbuild's matrix (drivers.toml) with the CUDA release and its minimum driver",
            )
        return Unsupported(
            text=f"driver {driver} does not support {gpu.name} ({what}: needs R{floor.branch} or later, "
            f"CUDA {format_minor(floor.cuda)})",
            fix=f"install an R{floor.branch} or later driver",
        )
    if gpu.min_driver_branch and driver.branch < gpu.min_driver_branch:
        return Unsupported(
            text=f"driver {driver} does not support {gpu.name} (it came after its architecture's first "
            f"CUDA release; NVIDIA's release notes name R{gpu.min_driver_branch} as its first branch)",
            fix=f"install an R{gpu.min_driver_branch} or later driver",
        )
    if gpu.max_driver_branch and driver.branch > gpu.max_driver_branch:
        return Unsupported(
            text=f"{gpu.name} is supported only up to driver branch R{gpu.max_driver_branch}; driver "
            f"{driver} cannot drive it (install an R{gpu.max_driver_branch} driver)",
            fix=f"install an R{gpu.max_driver_branch} driver",
        )
    return None


_NAMED = 4  # rows a capability stand-in names in its provenance


def gpus_with(matrix: Matrix, cc: tuple[int, int]) -> tuple[Gpu, ...]:
    return tuple(gpu for gpu in matrix.gpus if gpu.cc == cc)


def known_capabilities(matrix: Matrix) -> list[tuple[int, int]]:
    return sorted({gpu.cc for gpu in matrix.gpus})


def capability_names(rows: tuple[Gpu, ...]) -> str:
    """The GPUs of one capability as a message names them: a capability shared by dozens of catalogue
    rows is named by its first few (the file's order puts the long-known parts first), not a paragraph."""
    if len(rows) <= _NAMED + 1:  # "and 1 more" would take the room of the name it hides
        return ", ".join(gpu.name for gpu in rows)
    return ", ".join(gpu.name for gpu in rows[:_NAMED]) + f" and {len(rows) - _NAMED} more"


def capability_gpu(matrix: Matrix, cc: tuple[int, int]) -> Gpu | None:
    """A stand-in for "any GPU of this capability", or None when no GPU in the matrix has it.

    It takes the most permissive facts of the rows that share the capability (the oldest first CUDA,
    the newest last branch, no limit if any row has none): they share an architecture, so they
    agree wherever the data is right, and a capability query must not refuse what a name would allow.
    Forward compatibility stays off: it depends on the product, not the capability.
    """
    rows = gpus_with(matrix, cc)
    if not rows:
        return None
    lasts = [gpu.max_driver_branch for gpu in rows]
    names = capability_names(rows)
    # the capability is as certain as its best-sourced row: one row read first-hand on NVIDIA's page
    # settles it, however many were read from copies; when none was, the shortest note says least
    # about one product and most about the capability
    confident = (
        sorted((gpu.prov for gpu in rows), key=lambda p: len(p.note or ""))
        if all(gpu.prov.confidence for gpu in rows)
        else []
    )
    return Gpu(
        name=sm_name(cc),
        aliases=(),
        cc=cc,
        architecture=rows[0].architecture,
        first_cuda=min(gpu.first_cuda for gpu in rows),
        data_center=False,
        max_driver_branch=None if None in lasts else max(b for b in lasts if b is not None),
        # any host if any row comes in any host (9.0 is H100 as well as GH200); integrated only if
        # every row is (8.7 is Jetson Orin alone)
        host_platforms=()
        if any(not gpu.host_platforms for gpu in rows)
        else tuple(sorted({p for gpu in rows for p in gpu.host_platforms})),
        integrated=all(gpu.integrated for gpu in rows),
        integrated_stack=rows[0].integrated_stack,
        segment=None,
        # the lowest floor: a late SKU's own floor must not refuse its capability's earlier parts
        min_driver_branch=None if None in (floors := [g.min_driver_branch for g in rows]) else min(floors),
        # a format only if every GPU of the capability has it (they agree unless a row is wrong)
        bf16=all(gpu.bf16 for gpu in rows),
        fp16=all(gpu.fp16 for gpu in rows),
        memory_gb=(),
        prov=Provenance(
            where=f"gpus.toml compute capability {format_cc(cc)} ({names})",
            source=rows[0].prov.source,
            confidence=confident[0].confidence if confident else None,
            note=confident[0].note if confident else None,
        ),
    )
