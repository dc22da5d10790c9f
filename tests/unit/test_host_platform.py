"""This host's platform and whether it runs an image of another (issue 19, items 4 and 5): the pure
part of envbuild.image.platforms and the doctor's two checks, from uname -m names and image inspect
attributes as the Engine returns them."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.host.doctor import check_host_platform, image_platform_check
from envbuild.image.platforms import describe, platform_of, runnable

ARM64 = {"Id": "sha256:" + "1" * 64, "Os": "linux", "Architecture": "arm64", "Variant": "v8"}
AMD64 = {"Id": "sha256:" + "2" * 64, "Os": "linux", "Architecture": "amd64"}


def binfmt(tmp_path: Path, state: str | None) -> str:
    directory = tmp_path / "binfmt_misc"
    directory.mkdir()
    if state is not None:
        (directory / "qemu-aarch64").write_text(f"{state}\ninterpreter /usr/libexec/qemu-binfmt/aarch64\n")
    return str(directory)


def test_an_image_of_this_hosts_platform_runs_natively(tmp_path: Path) -> None:
    run = runnable("linux/amd64", machine="x86_64", binfmt=binfmt(tmp_path, None))
    assert run.ok and not run.emulated and run.handler is None
    assert runnable("aarch64", machine="aarch64", binfmt=str(tmp_path)).emulated is False


def test_an_arm64_image_on_x86_64_runs_through_an_enabled_qemu_handler(tmp_path: Path) -> None:
    directory = binfmt(tmp_path, "enabled")
    run = runnable("linux/arm64", machine="x86_64", binfmt=directory)
    assert run.ok and run.emulated and run.handler == f"{directory}/qemu-aarch64"


@pytest.mark.parametrize("state", [None, "disabled"])
def test_an_arm64_image_on_x86_64_without_a_handler_does_not_run(tmp_path: Path, state: str | None) -> None:
    run = runnable("linux/arm64", machine="x86_64", binfmt=binfmt(tmp_path, state))
    assert not run.ok and "this host is x86_64" in run.reason and "qemu-aarch64" in run.reason
    assert "update-binfmts --enable qemu-aarch64" in run.fix and "run it on a linux/arm64 host" in run.fix


def test_image_attributes_name_a_platform() -> None:
    assert platform_of(ARM64) == "linux/arm64" and platform_of(AMD64) == "linux/amd64"
    assert platform_of({"Os": "windows", "Architecture": "amd64"}) is None
    assert platform_of({"Os": "linux", "Architecture": "s390x"}) is None
    assert describe(ARM64) == "linux/arm64/v8"


@pytest.mark.parametrize(
    ("machine", "evidence"), [("x86_64", "linux/amd64 (x86_64)"), ("aarch64", "linux/arm64 (aarch64)")]
)
def test_doctor_reports_the_host_platform(machine: str, evidence: str) -> None:
    check = check_host_platform(machine)
    assert (check.name, check.status, check.evidence, check.fix) == ("host platform", "ok", evidence, None)


def test_doctor_warns_on_a_host_envbuild_builds_no_images_for() -> None:
    check = check_host_platform("riscv64")
    assert check.status == "warn" and "riscv64" in check.evidence and "linux/arm64" in check.evidence


def test_doctor_refuses_an_image_of_another_platform_with_the_fix() -> None:
    check = image_platform_check("acme/train:v1", ARM64, machine="x86_64")
    assert check.name == "image acme/train:v1 platform" and check.status == "fail"
    assert "the image is linux/arm64/v8 and this host is linux/amd64 (x86_64)" in check.evidence
    assert "reaches no GPU" in check.evidence
    assert '[stack] platform = "linux/amd64"' in check.fix and "linux/arm64/v8 host" in check.fix
    assert image_platform_check("acme/train:v1", AMD64, machine="x86_64").status == "ok"
    assert image_platform_check("acme/train:v1", ARM64, machine="aarch64").status == "ok"
