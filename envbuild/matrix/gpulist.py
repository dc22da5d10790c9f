"""`envbuild matrix gpus`: which rows a filter selects, and each row as a stable JSON document.

A lab asks "is our card in there?" with whatever it has at hand: the capability nvidia-smi's
`compute_cap` printed (`--cc 8.6`, or sm_86 from a build log), part of a name ("3060", "rtx a"), or
the whole name nvidia-smi printed. The word is matched through the name normaliser
(envbuild.matrix.gpunames), so "rtx a" finds every RTX A-series row however the rows spell their
brand, and "NVIDIA A100-SXM4-80GB" finds the A100.
"""

from __future__ import annotations

from envbuild.errors import UsageError
from envbuild.matrix.gpunames import name_key
from envbuild.matrix.model import Gpu, Matrix, find_gpu
from envbuild.matrix.versions import format_cc, format_minor, parse_compute_capability

CC_FORMS = "X.Y (8.6), sm_XY (sm_86) or compute_XY (compute_86)"


def parse_cc_filter(text: str) -> tuple[int, int]:
    cc = parse_compute_capability(text)
    if cc is None:
        raise UsageError(
            f"--cc {text!r} is not a compute capability",
            fix=f"write it as {CC_FORMS}; `nvidia-smi --query-gpu=compute_cap --format=csv` prints it",
        )
    return cc


def select_gpus(matrix: Matrix, *, cc: tuple[int, int] | None = None, word: str | None = None) -> list[Gpu]:
    """The rows of that capability whose name or an alias contains the word (both normalised), or
    that the word names outright; sorted by capability, then name."""
    rows = [g for g in matrix.gpus if cc is None or g.cc == cc]
    if word is not None:
        key = name_key(word)
        named = find_gpu(matrix, word)
        rows = [
            g
            for g in rows
            if g is named or (key and any(key in name_key(label) for label in (g.name, *g.aliases)))
        ]
    return sorted(rows, key=lambda g: (g.cc, g.name))


def gpu_document(gpu: Gpu) -> dict:
    """One row for `matrix gpus --json`: the same keys, in the same order, for every row (null where
    the row records nothing), so a script can read it without knowing which fields a row sets."""
    return {
        "name": gpu.name,
        "aliases": list(gpu.aliases),
        "compute_capability": format_cc(gpu.cc),
        "architecture": gpu.architecture,
        "segment": gpu.segment,
        "first_cuda": format_minor(gpu.first_cuda),
        "min_driver_branch": gpu.min_driver_branch,
        "max_driver_branch": gpu.max_driver_branch,
        "bf16": gpu.bf16,
        "fp16": gpu.fp16,
        "memory_gb": list(gpu.memory_gb),
        "source": gpu.prov.source,
    }
