"""`envbuild doctor` against the real Engine: its own checks, and the verdict on a real image."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.docker import docker
from tests.helpers.nvsmi import CU124_ARCH, by_name, doctor

pytestmark = pytest.mark.docker


def test_docker_checks_on_the_real_engine(capsys, fake_smi) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    _, report = doctor(capsys)
    checks = by_name(report)
    assert checks["docker engine"]["status"] == "ok" and checks["docker engine"]["evidence"].startswith(
        "Docker "
    )
    runtime = checks["nvidia runtime"]  # this engine has no NVIDIA runtime, and must say so
    assert runtime["status"] == "fail" and "nvidia-ctk runtime configure" in runtime["fix"]


def test_image_verdict_reads_labels_and_require_cuda(capsys, fake_smi, tmp_path: Path) -> None:

    base = "envbuild-test/bookworm:latest"
    if docker("image", "inspect", base, check=False).returncode != 0:
        pytest.fail("the bookworm base image is built by tests/test_render_docker.py's fixture")
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {base}\nENV NVIDIA_REQUIRE_CUDA=cuda>=12.4\n"
        f'LABEL io.envbuild.cuda="12.4" io.envbuild.compat="native" io.envbuild.gpu-arch="{CU124_ARCH}"\n'
    )
    tag = "envbuild-test/doctor-image:latest"
    docker("build", "-q", "-t", tag, str(context))
    try:
        fake_smi("banner_535_a100_4gpu_processes.txt")
        code, report = doctor(capsys, "--image", tag)
        verdict = by_name(report)[f"image {tag}"]
        assert code == 1 and verdict["status"] == "fail"
        assert "NVIDIA_REQUIRE_CUDA (cuda>=12.4)" in verdict["evidence"]
        fake_smi("banner_550_h100_8gpu.txt")
        _, report = doctor(capsys, "--image", tag)
        assert by_name(report)[f"image {tag}"]["status"] == "ok"
    finally:
        docker("rmi", "-f", tag, check=False)
