"""What tests that need PyPI share: the index, an environment that reaches only PyPI, and the one rule
for when PyPI cannot be reached.

Such tests carry the `pypi` marker (pyproject.toml; tests/conftest.py adds it to every test that
uses a PyPI fixture). Without PyPI they skip on a developer's machine, and fail under
ENVBUILD_REQUIRE_DOCKER=1 (CI), where a skipped test would hide a check that never ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

PYPI = "https://pypi.org/simple"
REQUIRED = "ENVBUILD_REQUIRE_DOCKER"  # set to 1 by .ci/run: every service a test needs must be there


def pypi_unreachable(why: str) -> NoReturn:
    """Skip the calling test (fail it in CI) because PyPI, or pip's index, did not answer: `why`."""
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"PyPI is needed here and {why}")
    pytest.skip(f"PyPI unreachable ({why}); set {REQUIRED}=1 to fail instead")


def pypi_only_env() -> dict[str, str]:
    """Only PyPI: the developer's pip.conf may add local find-links and indexes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pypi_wheel(requirement: str, dest: Path) -> Path:
    """Download one Linux x86_64 CPython 3.11 wheel from PyPI (no dependencies) into `dest`.

    Without PyPI the calling test skips, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI):
    tests/helpers/pypi.py's rule."""
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
    pypi_unreachable(failure or f"pip download left {len(wheels)} wheels")
