"""The facts an image's preflight guard judges a node by, from the matrix and the resolved stack.

The guard (envbuild.preflight) runs inside the image, where no matrix is: the plan hands it the floor
the stack was resolved with (the GA release's minimum driver natively, the minor-compatibility floor
under compat = "minor"), the build's compiled architectures for this platform, and the part of the GPU
catalogue this platform's hosts can have, each row under every key it answers to, with its first and
last driver branch (envbuild.matrix.support, the rule resolve and doctor use).
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.matrix.gpunames import name_key
from envbuild.matrix.support import first_driver
from envbuild.matrix.versions import format_cc, format_driver, format_minor
from envbuild.preflight import facts_document

if TYPE_CHECKING:
    from envbuild.matrix.model import Gpu, Matrix
    from envbuild.resolve.solver import Stack


def _first_branch(matrix: Matrix, gpu: Gpu) -> int | None:
    floor = first_driver(matrix, gpu)
    branches = [b for b in (floor.branch if floor else None, gpu.min_driver_branch) if b is not None]
    return max(branches) if branches else None


def catalogue_for(matrix: Matrix, platform: str) -> dict[str, list]:
    """Name key -> [name, compute capability, first branch, last branch] for the GPUs a host of
    `platform` can have (Jetson's integrated GPUs run L4T, whose driver has no /proc/driver/nvidia)."""
    table: dict[str, list] = {}
    for gpu in matrix.gpus:
        if gpu.integrated or (gpu.host_platforms and platform not in gpu.host_platforms):
            continue
        row = [gpu.name, format_cc(gpu.cc), _first_branch(matrix, gpu), gpu.max_driver_branch]
        for name in (gpu.name, *gpu.aliases):
            key = name_key(name)
            if key:
                table.setdefault(key, row)
    return dict(sorted(table.items()))


def image_facts(matrix: Matrix, stack: Stack, platform: str) -> dict:
    variant = stack.variant
    return facts_document(
        stack=f"{stack.framework.display_name} {stack.release.version} ({variant.name}, CUDA "
        f"{format_minor(stack.cuda)})",
        cuda=format_minor(stack.cuda),
        compat=stack.mode,
        min_driver=format_driver(stack.min_driver),
        arch=variant.arch_for(platform).describe(),
        platform=platform,
        gpus=catalogue_for(matrix, platform),
    )
