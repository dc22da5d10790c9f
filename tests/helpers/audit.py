"""Files for audit tests that need no download: real ELF objects without device code, and broken ones."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def plain_elf(path: Path) -> Path:
    """A real ELF object with no fatbin (this Python's own binary), copied to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(os.path.realpath(sys.executable), path)
    return path


def truncated(source: Path, path: Path, size: int) -> Path:
    """The first `size` bytes of `source`: an ELF or zip cut off as an interrupted copy leaves it."""
    path.write_bytes(source.read_bytes()[:size])
    return path


PYPI = "https://pypi.org/simple"


def pypi_only_env() -> dict[str, str]:
    """Only PyPI: the developer's pip.conf may add local find-links and indexes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pypi_wheel(requirement: str, dest: Path) -> Path:
    """Download one Linux x86_64 CPython 3.11 wheel from PyPI (no dependencies) into `dest`.

    Without PyPI the calling test skips, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI), as
    tests/integration/test_pins_metadata.py does."""
    import subprocess

    import pytest

    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", requirement, "--dest", str(dest),
        "--index-url", PYPI, "--python-version", "3.11", "--only-binary=:all:",
        "--platform", "manylinux_2_27_x86_64",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=300, env=pypi_only_env(), check=False
        )
        failure = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        failure = "pip download timed out"
    wheels = sorted(dest.glob("*.whl"))
    if failure is None and len(wheels) == 1:
        return wheels[0]
    why = failure or f"pip download left {len(wheels)} wheels"
    if os.environ.get("ENVBUILD_REQUIRE_DOCKER") == "1":
        pytest.fail(f"PyPI is needed here and {why}")
    pytest.skip(f"PyPI unreachable ({why}); set ENVBUILD_REQUIRE_DOCKER=1 to fail instead")
