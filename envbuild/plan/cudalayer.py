"""Which locked packages are CUDA libraries: the one list that decides what goes in the image's CUDA
layer, installed before the framework's own wheel.

The CUDA runtime wheels (`nvidia-*`, `cuda-toolkit`, cuda-python's parts, `triton`) are gigabytes and
change with the CUDA minor, not with the framework's patch release. In a layer of their own, a torch
2.12.0 -> 2.12.1 upgrade leaves that layer's inputs, and so its digest, unchanged: a push sends and a
node pulls only the framework layer. Only locked builds split: without a lock the framework's
dependencies are resolved inside the build, so nothing here knows them.
"""

from __future__ import annotations

import re

# By name prefix: every NVIDIA CUDA library wheel (nvidia-cuda-runtime[-cu12], nvidia-cublas,
# nvidia-cudnn-cu12, nvidia-nccl-cu12, nvidia-nvjitlink, ...)
CUDA_PREFIXES = ("nvidia-",)
# By exact name: the CUDA meta-package torch >= 2.11 pins, cuda-python's parts, and the GPU compiler
# torch pins per CUDA build (pytorch-triton on download.pytorch.org)
CUDA_NAMES = frozenset(
    {"cuda-toolkit", "cuda-python", "cuda-bindings", "cuda-pathfinder", "triton", "pytorch-triton"}
)


def is_cuda_package(name: str) -> bool:
    """True for a CUDA library wheel, by its PEP 503 name (any spelling: nvidia_cublas_cu12 too)."""
    canonical = re.sub(r"[-_.]+", "-", name).lower()
    return canonical in CUDA_NAMES or canonical.startswith(CUDA_PREFIXES)
