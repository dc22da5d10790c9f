"""The installed tool works from any directory: matrix/ and templates/ ship inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO


@pytest.mark.slow
def test_wheel_in_fresh_venv_resolves_from_another_directory(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)], check=True
    )
    wheel = next(dist.glob("envbuild-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "envbuild/_data/matrix/drivers.toml" in names
    assert "envbuild/_data/matrix/frameworks/torch.toml" in names
    assert "envbuild/_data/templates/dockerfile/wheels.Dockerfile.j2" in names
    assert "envbuild/smoke/programs/torch_smoke.py" in names
    assert "envbuild/smoke/programs/smoke_common.py" in names
    assert "envbuild/_data/templates/ci/github-workflow.yml.j2" in names
    assert "envbuild/_data/templates/ci/gitlab-ci.yml.j2" in names
    assert not [n for n in names if n.startswith("envbuild/_testing/")]  # the tests' services stay out

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ENVBUILD_MATRIX", "PYTHONPATH")}
    env["ENVBUILD_CACHE_DIR"] = str(tmp_path / "cache")

    def installed(*argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """A command of the installed venv, run from another directory."""
        return subprocess.run(
            [str(venv / "bin" / argv[0]), *argv[1:]],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            check=check,
        )

    done = installed("envbuild", "resolve", "--driver", "550")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("driver R550 (PB, EOL 2025-04) runs CUDA <= 12.4 natively")
    assert "12.4" in done.stdout
    where = installed(
        "python",
        "-c",
        "from envbuild.matrix.load import default_matrix_dir; print(default_matrix_dir())",
        check=True,
    )
    assert str(venv) in where.stdout and "_data" in where.stdout
    spec = elsewhere / "envbuild.toml"
    spec.write_text((REPO / "examples" / "torch-wheels" / "envbuild.toml").read_text())
    rendered = installed("envbuild", "render")
    assert rendered.returncode == 0, rendered.stderr
    dockerfile = (elsewhere / "build" / "default" / "Dockerfile").read_text()
    assert dockerfile.startswith("# Rendered by envbuild") and "FROM ubuntu:22.04" in dockerfile
    smoke = (elsewhere / "build" / "default" / "smoke.py").read_text()
    common = (elsewhere / "build" / "default" / "smoke_common.py").read_text()
    assert "from envbuild" not in smoke + common and 'FRAMEWORK = "torch"' in smoke  # no envbuild needed

    # installed from a local wheel file, which no CI runner has: the generators ask where from
    workflow = installed("envbuild", "ci", "github", "-o", "envbuild.yml")
    assert workflow.returncode == 2 and "--install" in workflow.stderr, workflow.stderr
    workflow = installed("envbuild", "ci", "github", "-o", "envbuild.yml", "--install", "envbuild==0.1.0")
    assert workflow.returncode == 0, workflow.stderr  # templates/ci/ from the wheel's _data
    assert (elsewhere / "envbuild.yml").read_text().startswith("# Written by envbuild")
    pipeline = installed("envbuild", "ci", "gitlab", "--install", "envbuild==0.1.0")
    assert pipeline.returncode == 0, pipeline.stderr
    assert (elsewhere / ".gitlab-ci.yml").read_text().startswith("# Written by envbuild")

    refresh = installed("envbuild", "matrix", "refresh", "--write")
    assert refresh.returncode == 2 and "inside the installed package" in refresh.stderr
