"""`envbuild doctor --runtime NAME`: the runtime `verify --runtime NAME` will use, checked in place of
the Docker Engine, for Slurm nodes without a Docker daemon.

Charliecloud is installed on this machine, so its check runs the real ch-run. Apptainer and Enroot are
not: small real executables on PATH print their captured version strings (tests/helpers/hosttools.py),
so the doctor's real subprocess path runs against what those tools say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.runtime import runtime_named
from tests.helpers.capability import missing
from tests.helpers.hosttools import (
    APPTAINER_1_3_4,
    CONTAINER_CLI,
    ENROOT_3_5_0,
    ENROOT_4_0_1,
    only_on_path,
    tool,
)
from tests.helpers.nvsmi import by_name, doctor

CH_RUN = "/usr/bin/ch-run"
ENGINE_FIX = (
    "start dockerd (systemctl start docker), check DOCKER_HOST, and that this user may use the socket "
    "(the docker group)"
)
# `ldconfig -p` of a GPU node (abridged capture: the header and the driver's libcuda lines)
LDCONFIG_GPU = (
    "1234 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n"
    "\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so"
)
LDCONFIG_CPU = (
    "873 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"
)


def linked(directory: Path, *paths: str) -> None:
    """Real binaries of this host in `directory`, so PATH can hold them and nothing else."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in paths:
        (directory / os.path.basename(path)).symlink_to(path)


@pytest.fixture
def charliecloud() -> None:
    """The real ch-run of this host (.ci/run installs charliecloud-runtime): CI fails without it."""
    if not os.access(CH_RUN, os.X_OK):
        why = f"no {CH_RUN}: install charliecloud-runtime (.ci/run does)"
        missing(why)


@pytest.fixture
def no_gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of one empty directory (the tools a test puts there) and an ldconfig cache without the
    NVIDIA driver, whatever this machine has."""
    bin_dir = tmp_path / "bin"
    only_on_path(monkeypatch, bin_dir)
    tool(bin_dir, "ldconfig", LDCONFIG_CPU)
    return bin_dir


# --- the runtime's binary and version -----------------------------------------------------------


@pytest.mark.usefixtures("charliecloud")
def test_charliecloud_passes_with_the_real_ch_run_and_no_docker_checks(capsys, monkeypatch) -> None:
    monkeypatch.delenv("USER", raising=False)  # batch jobs often lack it; ch-run refuses to run without
    code, report = doctor(capsys, "--runtime", "charliecloud", "--no-gpu")
    assert code == 0 and report["ok"] is True
    checks = by_name(report)
    assert list(checks) == ["host platform", "charliecloud"]
    evidence = checks["charliecloud"]["evidence"]
    assert checks["charliecloud"]["status"] == "ok"
    assert re.fullmatch(r"ch-run \d+\.\d+(\.\d+)? at /\S+/ch-run; unlike Docker it cannot: .+", evidence)
    assert runtime_named("charliecloud").limits[0] in evidence


@pytest.mark.usefixtures("charliecloud")
def test_the_exact_command_line_exits_0_here() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "envbuild", "doctor", "--runtime", "charliecloud", "--no-gpu"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\[  ok\] charliecloud +ch-run \d", done.stdout)
    assert "docker" not in done.stdout.lower().replace("unlike docker", "")
    assert done.stdout.endswith("0 failed, 0 warning(s), 2 checks\n")


def test_apptainer_version_from_its_captured_output(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", APPTAINER_1_3_4)
    code, report = doctor(capsys, "--runtime", "apptainer", "--no-gpu")
    check = by_name(report)["apptainer"]
    assert code == 0 and check["status"] == "ok"
    assert check["evidence"].startswith(f"apptainer 1.3.4 at {no_gpu_host / 'apptainer'}; unlike Docker")
    assert "runs as the calling user" in check["evidence"]


def test_enroot_3_fails_the_digest_floor_with_the_fix(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "enroot", ENROOT_3_5_0)
    code, report = doctor(capsys, "--runtime", "enroot", "--no-gpu")
    check = by_name(report)["enroot"]
    assert code == 1 and report["ok"] is False
    assert check["status"] == "fail"
    assert "enroot 3.5.0" in check["evidence"] and "needs >= 4.0" in check["evidence"]
    assert "@sha256:" in check["evidence"]
    assert check["fix"] == f"upgrade to enroot >= 4.0: {runtime_named('enroot').install_fix}"


def test_enroot_4_passes(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "enroot", ENROOT_4_0_1)
    code, report = doctor(capsys, "--runtime", "enroot", "--no-gpu")
    assert code == 0
    assert by_name(report)["enroot"]["evidence"].startswith("enroot 4.0.1 at ")


@pytest.mark.parametrize("name", ["apptainer", "enroot", "charliecloud"])
def test_a_missing_runtime_fails_with_how_to_get_it(capsys, no_gpu_host: Path, name: str) -> None:
    runtime = runtime_named(name)
    code, report = doctor(capsys, "--runtime", name)
    checks = by_name(report)
    assert code == 1
    assert checks[name] == {
        "name": name,
        "status": "fail",
        "evidence": f"`{runtime.binary}` is not on PATH",
        "fix": runtime.install_fix,
    }
    assert checks[f"{name} GPU"]["status"] == "skip"
    assert "docker engine" not in checks and "nvidia runtime" not in checks


def test_a_bare_number_is_not_a_version(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", "sh: 2: exec: not found")
    code, report = doctor(capsys, "--runtime", "apptainer", "--no-gpu")
    assert code == 1
    assert "without a version: sh: 2: exec: not found" in by_name(report)["apptainer"]["evidence"]


def test_a_version_command_that_fails_is_a_failed_check(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", "FATAL: could not open configuration file", exit_code=255)
    code, report = doctor(capsys, "--runtime", "apptainer", "--no-gpu")
    check = by_name(report)["apptainer"]
    assert code == 1 and check["status"] == "fail"
    assert "exited 255 without a version: FATAL: could not open configuration file" in check["evidence"]
    assert check["fix"].startswith("run `apptainer --version` by hand; ")


def test_a_hanging_version_command_meets_the_deadline(capsys, no_gpu_host: Path) -> None:
    script = no_gpu_host / "apptainer"
    script.write_text("#!/bin/sh\n/bin/sleep 60 &\nwait\n")  # a wrapper whose child holds the pipes
    script.chmod(0o755)
    code, report = doctor(capsys, "--runtime", "apptainer", "--no-gpu", "--timeout", "1")
    check = by_name(report)["apptainer"]
    assert code == 1 and check["status"] == "fail"
    assert "version command hung" in check["fix"]


def test_image_with_another_runtime_is_a_usage_error(capsys) -> None:
    assert main(["doctor", "--runtime", "apptainer", "--image", "ghcr.io/acme/train:v1"]) == 2
    err = capsys.readouterr().err
    assert "--image reads the image from the local Docker Engine" in err
    assert "envbuild verify REPO@sha256:... --runtime apptainer" in err


# --- what the GPU path needs ------------------------------------------------------------------------


def test_apptainer_gpu_through_nvidia_container_cli(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", APPTAINER_1_3_4)
    tool(no_gpu_host, "nvidia-container-cli", CONTAINER_CLI)
    _, report = doctor(capsys, "--runtime", "apptainer")
    check = by_name(report)["apptainer GPU"]
    assert check["status"] == "ok"
    assert check["evidence"] == f"--nv finds the NVIDIA libraries with {no_gpu_host / 'nvidia-container-cli'}"


def test_apptainer_gpu_through_the_ldconfig_cache(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", APPTAINER_1_3_4)
    tool(no_gpu_host, "ldconfig", LDCONFIG_GPU)
    _, report = doctor(capsys, "--runtime", "apptainer")
    check = by_name(report)["apptainer GPU"]
    assert check["status"] == "ok"
    assert check["evidence"].endswith("ldconfig cache (nvliblist.conf): /lib/x86_64-linux-gnu/libcuda.so.1")


def test_apptainer_gpu_without_driver_libraries_fails(capsys, no_gpu_host: Path) -> None:
    tool(no_gpu_host, "apptainer", APPTAINER_1_3_4)
    code, report = doctor(capsys, "--runtime", "apptainer")
    check = by_name(report)["apptainer GPU"]
    assert code == 1 and check["status"] == "fail"
    assert "no nvidia-container-cli on PATH, and no libcuda.so" in check["evidence"]
    assert "libnvidia-container-tools" in check["fix"] and "--smoke-device cpu" in check["fix"]


def test_enroot_gpu_needs_its_hook_and_nvidia_container_cli(
    capsys, no_gpu_host, tmp_path, monkeypatch
) -> None:
    tool(no_gpu_host, "enroot", ENROOT_4_0_1)
    sysconf = tmp_path / "enroot-conf"
    monkeypatch.setenv("ENROOT_SYSCONF_PATH", str(sysconf))
    hook = sysconf / "hooks.d" / "98-nvidia.sh"
    _, report = doctor(capsys, "--runtime", "enroot")
    missing = by_name(report)["enroot GPU"]
    assert missing["status"] == "fail"
    assert missing["evidence"] == (
        f"no NVIDIA hook {hook}; no nvidia-container-cli on PATH (the hook runs it)"
    )
    tool(hook.parent, hook.name, "")
    cli = tool(no_gpu_host, "nvidia-container-cli", CONTAINER_CLI)
    _, report = doctor(capsys, "--runtime", "enroot")
    assert by_name(report)["enroot GPU"] == {
        "name": "enroot GPU",
        "status": "ok",
        "evidence": f"NVIDIA hook {hook}, {cli}",
        "fix": None,
    }


@pytest.mark.usefixtures("charliecloud")
def test_charliecloud_gpu_needs_nvidia_container_cli(capsys, no_gpu_host: Path) -> None:
    linked(no_gpu_host, CH_RUN, "/usr/bin/ch-fromhost")
    _, report = doctor(capsys, "--runtime", "charliecloud")
    checks = by_name(report)
    assert checks["charliecloud"]["status"] == "ok"  # the real ch-run, through the link
    assert checks["charliecloud GPU"]["status"] == "fail"
    assert checks["charliecloud GPU"]["evidence"] == (
        "no nvidia-container-cli on PATH (`ch-fromhost --nvidia` runs it)"
    )
    cli = tool(no_gpu_host, "nvidia-container-cli", CONTAINER_CLI)
    _, report = doctor(capsys, "--runtime", "charliecloud")
    assert by_name(report)["charliecloud GPU"]["evidence"] == f"ch-fromhost --nvidia can use {cli}"


# --- an unreachable Engine points at the runtimes this host has -------------------------------------


@pytest.mark.usefixtures("charliecloud")
def test_unreachable_engine_names_the_runtimes_on_path(capsys, no_gpu_host, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-dockerd.sock'}")
    linked(no_gpu_host, CH_RUN)
    tool(no_gpu_host, "apptainer", APPTAINER_1_3_4)
    code, report = doctor(capsys, "--no-gpu")
    engine = by_name(report)["docker engine"]
    assert code == 1 and engine["status"] == "fail"
    assert engine["fix"] == (
        f"{ENGINE_FIX}; or, on a cluster node without a Docker daemon, use `--runtime apptainer` or "
        "`--runtime charliecloud` (apptainer, ch-run are on PATH): envbuild doctor --runtime apptainer, "
        "envbuild verify REPO@sha256:... --runtime apptainer"
    )


def test_unreachable_engine_without_other_runtimes_keeps_its_fix(
    capsys, no_gpu_host, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-dockerd.sock'}")
    code, report = doctor(capsys, "--no-gpu")
    assert code == 1
    assert by_name(report)["docker engine"]["fix"] == ENGINE_FIX
