"""The README's first command is light (issue 17, item 14): `make install` gives a working envbuild
without the 3 GB of frameworks, and `make test` is what brings the test tools and the frameworks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

HEAVY = ("torch", "jax", "tensorflow", "pytest")  # the smoke frameworks and a test tool


@pytest.mark.slow
def test_make_install_is_envbuild_alone_and_make_test_brings_the_rest(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS")}
    env["ENVBUILD_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        ["make", "install", f"VENV={venv}"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr

    python = str(venv / "bin" / "python")
    probe = f"import importlib.util as u; print(*[n for n in {HEAVY!r} if u.find_spec(n)])"
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert found.stdout.split() == []  # no framework, and no test tool either

    resolved = subprocess.run(
        [str(venv / "bin" / "envbuild"), "resolve", "--driver", "550", "--json"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert '"stacks"' in resolved.stdout

    # What `make test` would run next, without running it: the dev step with the frameworks first.
    planned = subprocess.run(
        ["make", "-n", "test", f"VENV={venv}"], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    lines = planned.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "[test,smoke,docs]" in line)
    pytest_run = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert install < pytest_run
