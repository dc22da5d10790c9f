"""`verify --smoke-device gpu --gpu-access ...` on this GPU-less host, with the real Engine (issue 37's
CDI part): without a CDI spec, `cdi` fails before any container with the message users are told; with
the spec nvidia-ctk writes (tests/fixtures/cdi), the CDI device request reaches the Engine, and its own
answer is the error. Nothing is tagged either way: verify tags nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.docker import docker

pytestmark = pytest.mark.docker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"


def verify(image: str, directory: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENVBUILD_CDI_SPEC_DIRS": str(FIXTURES / directory)}
    command = [sys.executable, "-m", "envbuild", "verify", image, "--smoke-device", "gpu", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)


def smoke_containers() -> list[str]:
    return docker("ps", "-aq", "--filter", "label=io.envbuild.role=smoke").stdout.split()


def test_cdi_without_a_spec_exits_1_with_the_message_and_starts_nothing(torch_image: str) -> None:
    done = verify(torch_image, "empty", "--gpu-access", "cdi")
    assert done.returncode == 1, done.stderr
    assert (
        "no CDI device nvidia.com/gpu on this host: generate one with "
        "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`" in done.stderr
    )
    assert "Traceback" not in done.stderr and smoke_containers() == []


def test_auto_with_a_spec_asks_the_engine_for_the_cdi_device_and_reports_its_answer(torch_image: str) -> None:
    info = json.loads(docker("info", "--format", "{{json .}}").stdout)
    done = verify(torch_image, "nvidia", "--gpu-access", "auto")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    if not info.get("CDISpecDirs"):  # Debian's 20.10 Engine knows no CDI driver: its own words come back
        assert (
            "this Docker Engine did not give the container the CDI device nvidia.com/gpu=all" in done.stderr
        )
        assert 'device driver "cdi"' in done.stderr
    assert smoke_containers() == []


def test_legacy_keeps_the_toolkits_device_request(torch_image: str) -> None:
    done = verify(torch_image, "nvidia", "--gpu-access", "legacy")
    assert done.returncode == 1
    assert "this Docker host cannot give containers a GPU" in done.stderr  # the legacy request's answer


def test_a_bad_gpu_access_variable_is_a_usage_error(torch_image: str) -> None:
    env = {**os.environ, "ENVBUILD_GPU_ACCESS": "cdii"}
    command = [sys.executable, "-m", "envbuild", "verify", torch_image, "--smoke-device", "gpu"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2 and "ENVBUILD_GPU_ACCESS='cdii' is not auto, legacy, cdi" in done.stderr
