"""Which shared objects a framework loads its own GPU kernels from: the libraries an audit judges.

Every library with device code is listed; these decide the exit code, because a GPU that has no
kernel image in them fails the framework's first CUDA op. The CUDA libraries the frameworks pull in
(cuBLAS, cuDNN...) are listed too but judged by the matrix's cuDNN floors, not here.
"""

from __future__ import annotations

import fnmatch
import os

# path patterns, matched against the path inside the wheel or image (fnmatch, "/" separated)
FRAMEWORK_LIBRARIES = {
    "torch": ("*torch/lib/libtorch_cuda.so", "*torch/lib/libtorch_cuda_*.so"),
    "jax": ("*jax_cuda*_plugin/*.so", "*jax_plugins/xla_cuda*/*.so"),
    "tensorflow": ("*tensorflow/python/_pywrap_tensorflow_internal.so", "*tensorflow/libtensorflow_cc.so*"),
}


def counts_for(path: str, framework: str | None) -> bool:
    """Whether the library at `path` (inside the artifact) decides the audit for `framework`; with no
    framework, every library with device code does."""
    normalized = path.replace(os.sep, "/")
    frameworks = [framework] if framework else list(FRAMEWORK_LIBRARIES)
    patterns = [p for name in frameworks for p in FRAMEWORK_LIBRARIES.get(name, ())]
    if framework is None and not any(fnmatch.fnmatch(normalized, p) for p in patterns):
        return True
    return any(fnmatch.fnmatch(normalized, p) for p in patterns)


def framework_of(paths: list[str]) -> str | None:
    """The framework whose libraries are among `paths`, when exactly one is."""
    found = {
        name
        for name, patterns in FRAMEWORK_LIBRARIES.items()
        for path in paths
        if any(fnmatch.fnmatch(path.replace(os.sep, "/"), p) for p in patterns)
    }
    return found.pop() if len(found) == 1 else None
