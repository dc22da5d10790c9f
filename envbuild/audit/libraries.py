"""Which shared objects a framework loads its own GPU kernels from: the libraries an audit judges.

Every library with device code is listed and judged; those of the framework decide the exit code,
because a GPU that has no kernel image in them fails the framework's first CUDA op. The CUDA
libraries the frameworks pull in (cuBLAS, cuDNN...) are listed too but judged by the matrix's cuDNN
floors, not here.
"""

from __future__ import annotations

import fnmatch
import os

from envbuild.errors import UsageError

# path patterns, matched against the path inside the wheel or image (fnmatch, "/" separated)
FRAMEWORK_LIBRARIES = {
    "torch": ("*torch/lib/libtorch_cuda.so", "*torch/lib/libtorch_cuda_*.so"),
    "jax": ("*jax_cuda*_plugin/*.so", "*jax_plugins/xla_cuda*/*.so"),
    "tensorflow": ("*tensorflow/python/_pywrap_tensorflow_internal.so", "*tensorflow/libtensorflow_cc.so*"),
}


def check_framework(framework: str | None) -> None:
    """Refuse a framework with no library list: with it, no library would count and every GPU pass."""
    if framework is not None and framework not in FRAMEWORK_LIBRARIES:
        raise UsageError(
            f"audit: unknown framework {framework!r}",
            fix=f"use one of {', '.join(sorted(FRAMEWORK_LIBRARIES))}, or none to judge every library",
        )


def counts_for(path: str, framework: str | None) -> bool:
    """Whether the library at `path` (inside the artifact, "/"-separated) decides the exit code.

    With a framework (given, or found from the libraries), only its own libraries do: a cuBLAS or
    NCCL build for other GPUs is not what fails the framework's first op, and their GPU coverage is
    the matrix's business. With none, every library with device code does: nothing says which one
    is loaded, so none may lack a kernel image."""
    if framework is None:
        return True
    check_framework(framework)
    normalized = path.replace(os.sep, "/")
    return any(fnmatch.fnmatch(normalized, pattern) for pattern in FRAMEWORK_LIBRARIES[framework])


def framework_of(paths: list[str]) -> str | None:
    """The framework whose libraries are among `paths`, when exactly one is."""
    found = {
        name
        for name, patterns in FRAMEWORK_LIBRARIES.items()
        for path in paths
        if any(fnmatch.fnmatch(path.replace(os.sep, "/"), p) for p in patterns)
    }
    return found.pop() if len(found) == 1 else None
