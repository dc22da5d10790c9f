"""What the explorer says of each GPU in the catalogue: its driver floor and last branch (the rule the
resolver's host-level problem and doctor share, envbuild.matrix.support), and which framework releases
carry kernels for it (the arch check the resolver rejects a build by, ArchList.covers).

Kernels are judged on the platform `resolve --gpu NAME` picks for the GPU (GH200 and GB200 come only
in arm64 hosts, whose wheels may carry fewer archs), and PTX counts: a native driver JIT-compiles it.
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.model import Framework, Gpu, Matrix, Release
from envbuild.matrix.support import first_driver, unsupported
from envbuild.matrix.versions import format_minor, parse_driver
from envbuild.resolve.platform_choice import choose_platform


class ReleaseRun(Record):
    """Consecutive releases of one framework (in release order) that all carry kernels for the GPU."""

    __slots__ = ("oldest", "newest", "count")
    oldest: Release
    newest: Release
    count: int


class DriverBound(Record):
    """A branch that bounds the drivers able to drive the GPU, and the matrix row that says so."""

    __slots__ = ("branch", "why", "source")
    branch: int | None  # None: no driver in the matrix is known to run the GPU's first CUDA
    why: str  # "CUDA 11.8", or the GPU row's own statement
    source: str


class GpuFacts(Record):
    __slots__ = ("gpu", "platform", "floor", "last", "driven_by", "kernels")
    gpu: Gpu
    platform: str
    floor: DriverBound | None  # None: older than every CUDA the matrix knows (any branch drives it)
    last: DriverBound | None  # None: current GPUs, no last branch
    driven_by: tuple[int, ...]  # the matrix's branches that drive it (support.unsupported says none)
    kernels: tuple[tuple[Framework, tuple[ReleaseRun, ...]], ...]  # newest run first


def gpu_facts(matrix: Matrix, gpu: Gpu) -> GpuFacts:
    platform = choose_platform([gpu], None)
    return GpuFacts(
        gpu=gpu,
        platform=platform,
        floor=_floor(matrix, gpu),
        last=DriverBound(
            branch=gpu.max_driver_branch, why=f"{gpu.prov.where}: max_driver_branch", source=gpu.prov.source
        )
        if gpu.max_driver_branch
        else None,
        driven_by=tuple(
            b for b in sorted(matrix.branches) if unsupported(matrix, gpu, parse_driver(str(b))) is None
        ),
        kernels=tuple((fw, release_runs(fw, gpu, platform)) for fw in matrix.frameworks),
    )


def _floor(matrix: Matrix, gpu: Gpu) -> DriverBound | None:
    floor = first_driver(matrix, gpu)
    if gpu.min_driver_branch and (
        floor is None or floor.branch is None or gpu.min_driver_branch > floor.branch
    ):
        return DriverBound(branch=gpu.min_driver_branch, why="its own first branch", source=gpu.prov.source)
    if floor is None:
        return None
    source = floor.release.prov.source if floor.release else gpu.prov.source
    return DriverBound(branch=floor.branch, why=f"CUDA {format_minor(floor.cuda)}", source=source)


def release_runs(framework: Framework, gpu: Gpu, platform: str) -> tuple[ReleaseRun, ...]:
    """The framework's releases with kernels for the GPU, as runs of consecutive releases, newest run
    first: a capability dropped and never restored is one run, a gap (a release built without it)
    shows as two."""
    runs: list[ReleaseRun] = []
    current: list[Release] = []
    for release in framework.releases:  # newest first
        if _has_kernels(release, gpu, platform):
            current.append(release)
            continue
        if current:
            runs.append(ReleaseRun(oldest=current[-1], newest=current[0], count=len(current)))
            current = []
    if current:
        runs.append(ReleaseRun(oldest=current[-1], newest=current[0], count=len(current)))
    return tuple(runs)


def _has_kernels(release: Release, gpu: Gpu, platform: str) -> bool:
    return any(
        platform in variant.platforms and variant.arch_for(platform).covers(gpu.cc, allow_ptx=True)
        for variant in release.variants
    )
