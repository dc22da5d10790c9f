"""Which cuDNN a candidate's install actually gets, and whether it has kernels for the queried GPUs.

cuDNN drops GPUs from its kernels on its own schedule (9.11 and later ship none below compute
capability 7.5, even in the CUDA 12 build), so a framework build whose archs cover a V100 can still
fail on it when pip brings a new cuDNN. Pure: matrix rows in, a CudnnOutcome out.

* A fixed cuDNN (torch cu118 -> 9.1.0.70) is judged by its own [[cudnn]] row.
* An open range (TF 2.20's ">=9.3.0.75,<10") is judged by the newest row inside the range with a build
  for the stack's CUDA major (nvidia-cudnn-cuNN): that is what pip installs. When that row has no
  kernels for a queried GPU, the outcome pins the newest row in the range that has them.
* Under --strategy base-image an open-ranged framework uses the image's cuDNN instead (TensorFlow
  without its `and-cuda` extra, jax[cudaNN-local]), so that one is judged as fixed.
* Floors: a release between two rows gets the higher of their floors (cuDNN never re-adds a GPU), one
  past the last row the last row's floor, and one before the first row the first row's floor; a row
  without a floor counts as the next known floor above it. Unknown is never read as "runs everywhere".
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.model import CudnnRelease, Gpu, Matrix, Variant

DEFAULT_OS = "ubuntu22.04"  # the OS resolve assumes for base-image when --os is not given


class CudnnOutcome(Record):
    __slots__ = ("version", "pinned", "newest", "short", "rows")
    version: tuple[int, int] | None  # the cuDNN X.Y the install gets (None: no queried GPU lacks it)
    pinned: bool  # an open range pinned below its newest release
    newest: tuple[int, int] | None  # the range's newest release (what pip would take unpinned)
    short: tuple[Gpu, tuple[int, int]] | None  # a queried GPU without kernels in `newest`, its floor
    rows: tuple[CudnnRelease, ...]  # the rows the judgement rests on (their provenance)


def fixed_version(text: str) -> tuple[int, int] | None:
    """ "9.1.0.70" -> (9, 1); a specifier (">=9.3,<10") -> None."""
    head = text.strip()
    if not head[:1].isdigit():
        return None
    parts = head.split(".")
    return (int(parts[0]), int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0)


def floor_of(matrix: Matrix, version: tuple[int, int]) -> tuple[int, int] | None:
    """The lowest compute capability cuDNN X.Y has kernels for (see the module docstring)."""
    known = sorted((r for r in matrix.cudnn if r.min_cc), key=lambda r: r.version)
    if not known:
        return None
    for row in known:
        if row.version == version:
            return row.min_cc
    below = [r.min_cc for r in known if r.version < version]
    above = [r.min_cc for r in known if r.version > version]
    candidates = [c for c in (below[-1] if below else None, above[0] if above else None) if c]
    return max(candidates)


def _row(matrix: Matrix, version: tuple[int, int]) -> tuple[CudnnRelease, ...]:
    return tuple(r for r in matrix.cudnn if r.version == version)


def _in_range(specifier, row: CudnnRelease) -> bool:
    """Whether any X.Y.* release of the row satisfies the range (">=9.12.0.46" admits row 9.12)."""
    from packaging.version import Version

    major, minor = row.version
    return any(Version(f"{major}.{minor}.{patch}") in specifier for patch in (0, 9999))


def _lowest(gpus: tuple[Gpu, ...]) -> Gpu:
    return min(gpus, key=lambda g: g.cc)


def judge(
    matrix: Matrix,
    variant: Variant,
    cuda: tuple[int, int],
    gpus: tuple[Gpu, ...],
    *,
    strategy: str | None,
    os_name: str | None,
) -> CudnnOutcome | None:
    """None when there is nothing to judge: no queried GPU, or a build that names no cuDNN."""
    if not gpus or not variant.cudnn:
        return None
    text = variant.cudnn
    fixed = fixed_version(text)
    if fixed is None and strategy == "base-image":
        image = matrix.image_for(cuda, os_name or DEFAULT_OS)
        if image is not None and image.cudnn:
            fixed = fixed_version(image.cudnn)
    gpu = _lowest(gpus)
    if fixed is not None:
        floor = floor_of(matrix, fixed)
        short = (gpu, floor) if floor and gpu.cc < floor else None
        return CudnnOutcome(version=fixed, pinned=False, newest=fixed, short=short, rows=_row(matrix, fixed))
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specifier = SpecifierSet(text)
    except InvalidSpecifier:
        return None  # `matrix check` validates the field; nothing sound to judge here
    candidates = sorted(
        (r for r in matrix.cudnn if _in_range(specifier, r) and any(lo[0] == cuda[0] for lo, _ in r.cuda)),
        key=lambda r: r.version,
        reverse=True,
    )
    if not candidates:
        # a range newer than every row: its floor is at least the newest known one
        floors = [r.min_cc for r in matrix.cudnn if r.min_cc]
        floor = max(floors) if floors else None
        short = (gpu, floor) if floor and gpu.cc < floor else None
        return CudnnOutcome(version=None, pinned=False, newest=None, short=short, rows=())
    newest = candidates[0]
    newest_floor = floor_of(matrix, newest.version)
    if newest_floor is None or gpu.cc >= newest_floor:
        return CudnnOutcome(version=newest.version, pinned=False, newest=newest.version, short=None, rows=())
    for row in candidates[1:]:
        floor = floor_of(matrix, row.version)
        if floor is not None and gpu.cc >= floor:
            return CudnnOutcome(
                version=row.version, pinned=True, newest=newest.version, short=None, rows=(newest, row)
            )
    return CudnnOutcome(
        version=None, pinned=False, newest=newest.version, short=(gpu, newest_floor), rows=(newest,)
    )
