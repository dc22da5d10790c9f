"""Real Docker Engine: build a rendered `wheels` context air-gapped, and keep the framework layer cached.

The base image is Debian bookworm made locally with debootstrap and `docker import` (no registry is
reachable), and the wheelhouse holds torch 2.13.0 for Python 3.11 from `pip download`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.pyindex import download_for_target

pytestmark = pytest.mark.docker

BASE_IMAGE = "envbuild-test/bookworm:latest"
SPEC = """
[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"
strategy = "wheels"

[packages]
pip = ["six==1.16.0"]

[smoke]
device = "cpu"
"""


def docker_cli() -> str:
    """A client that speaks BuildKit: Debian's docker.io binary when the first on PATH lacks buildx."""
    for candidate in (os.environ.get("DOCKER_CLI"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("no docker client found (install docker.io)")


def docker(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    return subprocess.run(
        [docker_cli(), *args], capture_output=True, text=True, check=check, env=env, **kwargs
    )


@pytest.fixture(scope="session")
def bookworm_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    if docker("image", "inspect", BASE_IMAGE, check=False).returncode == 0:
        return BASE_IMAGE
    root = tmp_path_factory.mktemp("bookworm") / "rootfs"
    subprocess.run(
        ["debootstrap", "--variant=minbase", "bookworm", str(root), "http://deb.debian.org/debian"],
        check=True,
        capture_output=True,
    )
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        [docker_cli(), "import", "-", BASE_IMAGE], stdin=tar.stdout, check=True, capture_output=True
    )
    tar.wait()
    return BASE_IMAGE


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prepared = os.environ.get("ENVBUILD_TEST_WHEELHOUSE")  # fetched once by .ci/run
    if prepared and any(Path(prepared).glob("torch-2.13.0*.whl")) and any(Path(prepared).glob("six-1.17.0*")):
        return Path(prepared)
    directory = download_for_target(tmp_path_factory.mktemp("wheelhouse"), "torch==2.13.0", "six==1.16.0")
    return download_for_target(directory, "six==1.17.0", no_deps=True)


def render_and_build(workdir: Path, spec_text: str, wheelhouse: Path, base: str, tag: str) -> tuple[str, str]:
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / "envbuild.toml"
    spec.write_text(spec_text)
    out = workdir / "build"
    assert (
        main(
            ["render", "-f", str(spec), "-o", str(out), "--wheelhouse", str(wheelhouse), "--base-image", base]
        )
        == 0
    )
    context = out / "default"
    built = docker("build", "--progress=plain", "-t", tag, str(context), check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built.stdout + built.stderr, (context / "Dockerfile").read_text()


def layers(tag: str) -> list[str]:
    return json.loads(docker("image", "inspect", tag, "--format", "{{json .RootFS.Layers}}").stdout)


@pytest.fixture
def images():
    tags: list[str] = []
    yield tags
    for tag in tags:
        docker("rmi", "-f", tag, check=False)


def test_wheels_build_runs_torch_as_non_root(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    images.append("envbuild-test/render:one")
    render_and_build(tmp_path, SPEC, wheelhouse, bookworm_image, images[0])
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
    _, dockerfile = render_and_build(tmp_path / "a", SPEC, wheelhouse, base, images[0])
    log, _ = render_and_build(
        tmp_path / "b", SPEC.replace("six==1.16.0", "six==1.17.0"), wheelhouse, base, images[1]
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
