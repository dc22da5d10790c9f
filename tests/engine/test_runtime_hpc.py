"""`envbuild verify REPO@sha256:... --runtime apptainer|enroot` on this host: the real run of the
torch image pushed by digest when the runtime is on PATH; otherwise the error a cluster user without
it gets (exit 1, what is missing and how to get it, no traceback), and pytest's summary says the real
run was not done. Neither runtime is packaged for Debian, so CI takes the second path; the command
lines both would run are tested exactly in tests/unit/test_runtime_commands.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.runtime import runtime_named
from tests.helpers.notrun import not_run
from tests.helpers.runtimeimages import pushed_torch_image

REPOSITORY = "envbuild-test/runtime-hpc"


@pytest.fixture(scope="module")
def candidate(request: pytest.FixtureRequest, anonymous_registry: str) -> Iterator[str]:
    """The session's torch image by digest; only asked for (getfixturevalue) when a runtime is installed."""
    image = request.getfixturevalue("torch_image")
    yield from pushed_torch_image(image, anonymous_registry, REPOSITORY)


def verify(ref: str, runtime: str, directory: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "envbuild", "verify", ref, "--runtime", runtime, "--smoke-device", "cpu"]
    command += ["--report", str(directory / "report.json")]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, check=False)


@pytest.mark.parametrize("name", ["apptainer", "enroot"])
def test_verify_runs_for_real_or_says_the_runtime_is_missing(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    runtime = runtime_named(name)
    scratch = tmp_path / "runtime"
    scratch.mkdir()
    env = {"ENVBUILD_RUNTIME_DIR": str(scratch)}
    if shutil.which(runtime.binary) is None:
        ref = "127.0.0.1:5000/envbuild-test/runtime-hpc@sha256:" + "0" * 64
        done = verify(ref, name, tmp_path, env)
        assert done.returncode == 1, done.stderr
        assert f"--runtime {name} needs `{runtime.binary}` on PATH" in done.stderr
        assert runtime.install_fix in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "report.json").exists()
        not_run(f"{name}: not on PATH, the real run was not done")
        return
    ref = request.getfixturevalue("candidate")
    done = verify(ref, name, tmp_path, env)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["report"]["passed"] is True and saved["report"]["runtime"] == name
    assert os.listdir(scratch) == []
