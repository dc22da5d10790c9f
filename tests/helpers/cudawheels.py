"""A real CUDA wheel from PyPI for the audit tests: jax-cuda12-plugin 0.10.2 (8 MB), whose libraries
carry SASS for sm_50..sm_120 and PTX for compute_120 (read with cuobjdump; issue 16).

Needs https://pypi.org: skips without it, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI), as
tests/integration/test_pins_metadata.py does. Callers cache it per session (a session fixture).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

JAX_PLUGIN = "jax-cuda12-plugin==0.10.2"
PLUGIN_DIR = "jax_cuda12_plugin"
PYPI = "https://pypi.org/simple"


def download_jax_plugin(directory: Path) -> Path:
    """The jax-cuda12-plugin 0.10.2 wheel for CPython 3.11 on Linux x86_64, from PyPI only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            JAX_PLUGIN,
            "--python-version",
            "3.11",
            "--only-binary=:all:",
            "--platform",
            "manylinux_2_27_x86_64",
            "--index-url",
            PYPI,
            "-d",
            str(directory),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    wheels = sorted(directory.glob("jax_cuda12_plugin-0.10.2-*.whl"))
    if done.returncode != 0 or not wheels:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        if os.environ.get("ENVBUILD_REQUIRE_DOCKER") == "1":
            pytest.fail(f"PyPI is needed here and pip download {JAX_PLUGIN} failed: {why}")
        pytest.skip(f"PyPI unreachable ({why}); set ENVBUILD_REQUIRE_DOCKER=1 to fail instead")
    return wheels[0]


def unpack_libraries(wheel: Path, directory: Path) -> Path:
    """The wheel's shared objects under directory/jax_cuda12_plugin/; that directory."""
    target = directory / PLUGIN_DIR
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(PLUGIN_DIR + "/") and name.endswith(".so"):
                (target / name.split("/", 1)[1]).write_bytes(archive.read(name))
    return target
