"""Small real executables on a test PATH that answer as a host's tools do: the version strings are
captured output of the real tools (Apptainer 1.3.4, Enroot 3.5.0 and 4.0.1, nvidia-container-cli),
so `envbuild doctor --runtime NAME` runs its real subprocess path on a host without them."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

# what `apptainer --version`, `enroot version` and `nvidia-container-cli --version` print
APPTAINER_1_3_4 = "apptainer version 1.3.4"
ENROOT_3_5_0 = "3.5.0"
ENROOT_4_0_1 = "4.0.1"
CONTAINER_CLI = "cli-version: 1.17.8\nlib-version: 1.17.8"


def tool(directory: Path, name: str, output: str, exit_code: int = 0) -> Path:
    """An executable `name` in `directory` that prints `output` and exits `exit_code`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(output)}\nexit {exit_code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def only_on_path(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """PATH is `directory` alone (plus nothing else): no real runtime, no ldconfig is found."""
    directory.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PATH", str(directory))
