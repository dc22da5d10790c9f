"""The human summary of a verified smoke report says where it ran: the image's platform, whether QEMU
ran it, and the runtime when it was not Docker (a Slurm job's log then says Apptainer ran it)."""

from __future__ import annotations

import pytest

from envbuild.smoke.run import summary
from tests.helpers.reports import captured


def verified(**host: object) -> dict:
    return captured("torch-cpu-passed.json") | host


def platform_line(report: dict) -> str:
    (line,) = [line for line in summary(report).splitlines() if "platform" in line or "runtime" in line]
    return line.strip()


@pytest.mark.parametrize("runtime", ["apptainer", "enroot", "charliecloud"])
def test_a_command_line_runtime_is_named_beside_the_platform(runtime: str) -> None:
    report = verified(image_platform="linux/amd64", emulated=False, runtime=runtime)
    assert platform_line(report) == f"platform linux/amd64 (native, {runtime})"


def test_docker_is_not_named() -> None:
    report = verified(image_platform="linux/arm64", emulated=True, runtime="docker")
    assert platform_line(report) == "platform linux/arm64 (emulated (QEMU), CPU only)"


def test_a_runtime_without_a_known_platform_still_says_which_ran() -> None:
    report = verified(image_platform=None, emulated=False, runtime="enroot")
    assert platform_line(report) == "runtime enroot"


def test_a_plain_smoke_report_says_neither() -> None:
    assert not [line for line in summary(verified()).splitlines() if "platform" in line or "runtime" in line]
