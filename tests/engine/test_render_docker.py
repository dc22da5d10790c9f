"""Real Docker Engine: build a rendered `wheels` context air-gapped, and keep the framework layer cached.

The base image is Debian bookworm made locally with debootstrap and `docker import` (no registry is
reachable), and the wheelhouse holds torch 2.13.0 for Python 3.11 from `pip download`. Each test
builds a context of its own rather than using the session's torch image: a spec with literal env and
label values, a cache test on a base of its own, and the pip installer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.docker import TORCH_SPEC, docker, layers, render_and_build

pytestmark = pytest.mark.docker


def test_wheels_build_runs_torch_as_non_root(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    images.append("envbuild-test/render:one")
    literal = '[image]\nenv = { HINT = "pa$word" }\nlabels = { "com.example.team" = "équipe $HOME" }\n'
    render_and_build(tmp_path, TORCH_SPEC + literal, wheelhouse, bookworm_image, images[0])
    capsys.readouterr()
    ran = docker(
        "run",
        "--rm",
        "--network",
        "none",
        images[0],
        "python",
        "-c",
        "import os, torch, six; print(torch.__version__, os.getuid(), six.__version__)",
    )
    version, uid, six_version = ran.stdout.split()
    assert version.startswith("2.13.0") and uid == "10001" and six_version == "1.16.0"
    config = json.loads(docker("image", "inspect", images[0], "--format", "{{json .Config}}").stdout)
    assert config["User"] == "10001:10001"
    assert config["Labels"]["io.envbuild.framework-version"] == "2.13.0"
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in config["Env"]
    assert "HINT=pa$word" in config["Env"]  # `$` is not expanded, non-ASCII is not \u-escaped
    assert config["Labels"]["com.example.team"] == "équipe $HOME"
    smoke = docker(
        "run",
        "--rm",
        "--network",
        "none",
        images[0],
        "python",
        "/opt/envbuild/smoke.py",
        "--device",
        "cpu",
        "--steps",
        "10",
        check=False,
    )
    report = json.loads(smoke.stdout.strip().splitlines()[-1])
    assert smoke.returncode == 0, report
    assert report["framework"] == "torch" and report["loss_decreased"] is True


def test_changing_a_user_package_keeps_the_framework_layer(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A base of its own (one extra layer on bookworm), so these two builds share cache records only with
    # each other: a --no-cache build elsewhere on this engine leaves other records for the same steps.
    import uuid

    base = f"envbuild-test/render-base:{uuid.uuid4().hex[:12]}"
    images += ["envbuild-test/render:before", "envbuild-test/render:after", base]
    context = tmp_path / "base"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {bookworm_image}\nRUN echo {base} > /envbuild-test-base\n")
    docker("build", "-q", "-t", base, str(context))
    _, dockerfile = render_and_build(tmp_path / "a", TORCH_SPEC, wheelhouse, base, images[0])
    log, _ = render_and_build(
        tmp_path / "b", TORCH_SPEC.replace("six==1.16.0", "six==1.17.0"), wheelhouse, base, images[1]
    )
    capsys.readouterr()
    # the framework RUN is reported as taken from cache...
    step = next(
        line for line in log.splitlines() if "requirements-framework.txt -c" in line and "RUN" in line
    )
    step_id = step.split()[0]
    assert f"{step_id} CACHED" in log
    # ...and every layer up to it is byte-identical; the user layer is not
    lines = dockerfile[: dockerfile.index("COPY requirements.txt")].splitlines()
    before_user = 1 + sum(1 for line in lines if line.startswith(("RUN ", "COPY ")))
    first, second = layers(images[0]), layers(images[1])
    assert first[:before_user] == second[:before_user]
    assert first != second
    ran = docker(
        "run", "--rm", "--network", "none", images[1], "python", "-c", "import six; print(six.__version__)"
    )
    assert ran.stdout.strip() == "1.17.0"


def test_installer_pip_builds_the_old_way(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    images.append("envbuild-test/render:pip")
    spec = TORCH_SPEC + '[image]\ninstaller = "pip"\n'
    _, dockerfile = render_and_build(tmp_path, spec, wheelhouse, bookworm_image, images[0])
    capsys.readouterr()
    assert "RUN python3 -m venv /opt/venv" in dockerfile and "envbuild-uv" not in dockerfile
    ran = docker(
        "run",
        "--rm",
        "--network",
        "none",
        images[0],
        "sh",
        "-c",
        "python -c 'import six, torch; print(six.__version__)' && pip --version",
    )
    assert ran.stdout.splitlines()[0] == "1.16.0" and "/opt/venv" in ran.stdout
