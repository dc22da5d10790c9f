"""A real CUDA wheel from PyPI for the audit tests: jax-cuda12-plugin 0.10.2 (8 MB), whose libraries
carry SASS for sm_50..sm_120 and PTX for compute_120 (read with cuobjdump; issue 16).

Needs https://pypi.org: skips without it, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI), by
tests/helpers/pypi.py's rule. Callers cache it per session (a session fixture).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.helpers.pypi import pypi_wheel

JAX_PLUGIN = "jax-cuda12-plugin==0.10.2"
PLUGIN_DIR = "jax_cuda12_plugin"


def download_jax_plugin(directory: Path) -> Path:
    """The jax-cuda12-plugin 0.10.2 wheel for CPython 3.11 on Linux x86_64, from PyPI only."""
    return pypi_wheel(JAX_PLUGIN, directory)


def unpack_libraries(wheel: Path, directory: Path) -> Path:
    """The wheel's shared objects under directory/jax_cuda12_plugin/; that directory."""
    target = directory / PLUGIN_DIR
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(PLUGIN_DIR + "/") and name.endswith(".so"):
                (target / name.split("/", 1)[1]).write_bytes(archive.read(name))
    return target
