"""Platforms on the real Engine (issue 19, items 4 and 5): a build asked for linux/arm64 that makes
another architecture fails before anything can tag it; BuildKit builds a real arm64 image from the local
arm64 base when asked for the platform; and `doctor --image` refuses the arm64 base on this x86_64 host
with the fix. The arm64 base (envbuild-test/bookworm-arm64, tests/helpers/docker.py) is a real one."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import BuildError
from envbuild.image import builder as engine
from envbuild.image.platforms import BINFMT_ENV
from tests.helpers.capability import missing
from tests.helpers.docker import architecture, docker
from tests.helpers.nvsmi import by_name, doctor

pytestmark = pytest.mark.docker


@pytest.fixture
def x86_64_host() -> None:
    """These tests read an arm64 image as the foreign one: on an arm64 host it is the native one, and
    what they check (the refusal of a foreign image, QEMU's handler) cannot be checked there."""
    if platform.machine() != "x86_64":
        missing(f"written for an x86_64 host (this one is {platform.machine()})")


def context(tmp_path: Path, base: str) -> Path:
    directory = tmp_path / "ctx"
    directory.mkdir()
    (directory / "Dockerfile").write_text(f"FROM {base}\nRUN uname -m > /machine\n")
    return directory


def test_a_classic_build_for_arm64_from_an_amd64_base_fails_on_the_architecture_check(
    tmp_path: Path, bookworm_image: str, x86_64_host: None
) -> None:
    """The classic builder takes the platform and builds for the host anyway from a local amd64 base:
    only the check of the image it made catches that."""
    log = tmp_path / "build.log"
    with pytest.raises(BuildError) as caught:
        engine.build_image(
            str(context(tmp_path, bookworm_image)), backend="api", log_path=str(log), platform="linux/arm64"
        )
    assert "made an image for linux/amd64, not linux/arm64" in caught.value.message
    assert "not tagged or pushed" in caught.value.message and "--builder buildkit" in caught.value.fix
    assert "build stopped: BuildError: the build made an image for linux/amd64" in log.read_text()


def test_buildkit_builds_arm64_from_the_local_arm64_base_and_runs_it_emulated(
    tmp_path: Path, bookworm_arm64_image: str, images: list[str], x86_64_host: None
) -> None:
    log = tmp_path / "build.log"
    built = engine.build_image(
        str(context(tmp_path, bookworm_arm64_image)),
        backend="buildkit",
        log_path=str(log),
        platform="linux/arm64",
    )
    assert "--platform linux/arm64" in log.read_text()
    tag = "envbuild-test/platform-check:arm64"
    images.append(tag)
    docker("tag", built.image_id, tag)
    assert architecture(tag) == "linux/arm64"
    # the RUN step ran under QEMU: the image's machine is aarch64
    assert docker("run", "--rm", tag, "cat", "/machine").stdout.strip() == "aarch64"
    assert engine.check_platform(built.image_id, "arm64") == "linux/arm64"


def test_doctor_reports_the_host_platform_and_refuses_an_arm64_image(
    capsys, bookworm_arm64_image: str, bookworm_image: str, x86_64_host: None
) -> None:
    code, report = doctor(capsys, "--no-gpu", "--image", bookworm_arm64_image)
    checks = by_name(report)
    assert checks["host platform"] == {
        "name": "host platform",
        "status": "ok",
        "evidence": "linux/amd64 (x86_64)",
        "fix": None,
    }
    refused = checks[f"image {bookworm_arm64_image} platform"]
    assert code == 1 and refused["status"] == "fail"
    assert refused["evidence"].startswith("the image is linux/arm64")
    assert '[stack] platform = "linux/amd64"' in refused["fix"]
    assert f"image {bookworm_arm64_image}" not in checks  # no CUDA verdict for an image that cannot run
    _, native = doctor(capsys, "--no-gpu", "--image", bookworm_image)
    assert by_name(native)[f"image {bookworm_image} platform"]["status"] == "ok"


ARM64_SPEC = """
[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"
strategy = "wheels"
platform = "linux/arm64"

[image]
installer = "pip"  # uv's aarch64 binary would need a wheelhouse; this build stops before it anyway
"""


@pytest.mark.parametrize(
    ("handler", "device", "said"),
    [
        (None, "cpu", "cannot build for linux/arm64 on this host"),
        ("enabled", "gpu", "runs on this x86_64 host only under QEMU emulation, which reaches no GPU"),
    ],
    ids=["no-qemu-handler", "gpu-smoke-emulated"],
)
def test_an_arm64_build_that_cannot_pass_here_stops_before_building(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys,
    bookworm_arm64_image: str,
    x86_64_host: None,
    handler: str | None,
    device: str,
    said: str,
) -> None:
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    if handler:
        (binfmt / "qemu-aarch64").write_text(f"{handler}\ninterpreter /usr/libexec/qemu-binfmt/aarch64\n")
    monkeypatch.setenv(BINFMT_ENV, str(binfmt))
    spec = tmp_path / "envbuild.toml"
    spec.write_text(ARM64_SPEC)
    out = tmp_path / "build"
    argv = ["build", "-f", str(spec), "-o", str(out), "--base-image", bookworm_arm64_image]
    assert main([*argv, "--smoke-device", device]) == 1
    err = capsys.readouterr().err
    assert said in err and "linux/arm64" in err
    record = json.loads((out / "default" / "record.json").read_text())
    assert record["status"] == "failed" and record["platform"] == "linux/arm64"
    assert set(record["stages"]) == {"render"} and record["images"] == {} and record["tags"] == []
