"""The preflight guard in a real image (issue 36): the engine tests' torch CPU image, run with a fake
root of real /proc files (tests/fixtures/preflight, SOURCES.md) bind-mounted read-only and
ENVBUILD_PREFLIGHT_ROOT pointing at it; through `docker run` and through Charliecloud's `ch-run`.

The image's facts are torch 2.13.0 cu130: driver floor 580.65.06, archs 7.5 to 12.0 (its labels say
so, and the first test checks that the guard read the same)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.preflight import STOP_STATUS
from tests.helpers.docker import docker, docker_cli

pytestmark = pytest.mark.docker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"
MOUNT = "/preflight-root"
PRINT_ONE = ("python", "-c", "print(1)")


def run(image: str, root: str, *argv: str, entrypoint: str | None = None, **env: str):
    options = ["--rm", "--network", "none", "-v", f"{FIXTURES / root}:{MOUNT}:ro"]
    options += ["-e", f"ENVBUILD_PREFLIGHT_ROOT={MOUNT}"]
    for key, value in env.items():
        options += ["-e", f"{key}={value}"]
    if entrypoint is not None:
        options += ["--entrypoint", entrypoint]
    return docker("run", *options, image, *argv, check=False, timeout=300)


def test_the_guard_reads_the_facts_the_labels_state(torch_image: str) -> None:
    done = run(torch_image, "h100-r580", "python", "-m", "envbuild_preflight", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", torch_image).stdout)
    assert document["needs"]["min_driver"] == labels["io.envbuild.min-driver"]
    assert document["needs"]["arch"] == labels["io.envbuild.gpu-arch"]
    assert document["verdict"] == "ok" and document["found"]["gpus"][0]["cc"] == "9.0"


def test_an_old_driver_stops_the_program_with_the_message_and_the_status(torch_image: str) -> None:
    done = run(torch_image, "v100-r565", *PRINT_ONE)
    assert done.returncode == STOP_STATUS and done.stdout == ""
    assert "driver 565.57.01 is older than 580.65.06" in done.stderr
    assert "fix: run it on a node with an R580 or newer driver" in done.stderr
    assert "envbuild resolve --driver 565.57.01 --gpu 'Tesla V100-SXM2-16GB'" in done.stderr


def test_a_good_driver_prints_1_and_nothing_else(torch_image: str) -> None:
    done = run(torch_image, "h100-r580", *PRINT_ONE)
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n", "")


def test_entrypoint_python_is_guarded_too(torch_image: str) -> None:
    done = run(torch_image, "v100-r565", "-c", "print(1)", entrypoint="python")
    assert done.returncode == STOP_STATUS and "older than 580.65.06" in done.stderr


def test_no_driver_files_give_the_warning_and_then_1(torch_image: str) -> None:
    done = run(torch_image, "no-driver", *PRINT_ONE)
    assert done.returncode == 0 and done.stdout == "1\n"
    assert done.stderr.count("\n") == 1 and "no NVIDIA driver is visible" in done.stderr


def test_warn_runs_the_program_and_says_why_it_should_not(torch_image: str) -> None:
    done = run(torch_image, "v100-r565", *PRINT_ONE, ENVBUILD_PREFLIGHT="warn")
    assert done.returncode == 0 and done.stdout == "1\n" and "running it anyway" in done.stderr


def test_the_smoke_report_records_the_guards_verdict(torch_report: Path) -> None:
    """The session's CPU verify ran on this driverless host: the report says what the guard found."""
    preflight = json.loads(torch_report.read_text())["report"]["preflight"]
    assert preflight["verdict"] == "no-driver" and preflight["mode"] == "warn"


def test_verify_on_a_node_the_guard_refuses_names_the_guards_finding(
    torch_image: str, tmp_path: Path
) -> None:
    """A GPU smoke step stops at the guard before torch is imported: verify says what the guard found,
    not "no report". (On this GPU-less host the Engine would refuse the GPU request first, so the
    refusal is judged from the container's own output, as every runtime's is.)"""
    from envbuild.errors import VerifyError
    from envbuild.image.verify import judge_output

    done = run(torch_image, "v100-r565", "python", "/opt/envbuild/smoke.py", "--device", "gpu")
    assert done.returncode == STOP_STATUS
    with pytest.raises(VerifyError) as raised:
        judge_output(
            done.stdout,
            done.stderr,
            done.returncode,
            device="gpu",
            seconds=1.0,
            image_id="sha256:x",
            platform="linux/amd64",
            emulated=False,
            runtime="docker",
        )
    assert raised.value.message.startswith("the image's preflight guard refused this node: driver 565.57.01")
    assert "R580 or newer" in raised.value.fix


# ---------------------------------------------------------------------------------------------
# Charliecloud: ch-run passes no NVIDIA_REQUIRE_* check at all; the guard is the only one


@pytest.fixture(scope="module")
def unpacked(torch_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if shutil.which("ch-run") is None or shutil.which("ch-convert") is None:
        pytest.fail("Charliecloud is not installed (.ci/run installs charliecloud-runtime)")
    scratch = tmp_path_factory.mktemp("ch-preflight")
    name = f"envbuild-preflight-{uuid.uuid4().hex[:8]}"
    docker("create", "--name", name, torch_image, "true")  # the image has no CMD of its own
    try:
        with open(scratch / "image.tar", "wb") as handle:
            subprocess.run([docker_cli(), "export", name], stdout=handle, check=True, timeout=600)
    finally:
        docker("rm", "-f", name, check=False)
    subprocess.run(
        ["ch-convert", "-i", "tar", "-o", "dir", str(scratch / "image.tar"), str(scratch / "image")],
        check=True,
        capture_output=True,
        timeout=600,
        env={"USER": "root", "PATH": "/usr/bin:/bin"},
    )
    (scratch / "image.tar").unlink()
    yield scratch / "image"
    shutil.rmtree(scratch, ignore_errors=True)


def ch_run(image: Path, root: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env_file = tmp_path / "env"
    # /mnt: a bind destination ch-run finds in the (read-only) image directory
    env_file.write_text("PATH=/opt/venv/bin:/usr/bin:/bin\nENVBUILD_PREFLIGHT_ROOT=/mnt\n")
    argv = ["ch-run", "--unset-env=*", f"--set-env={env_file}", "-b", f"{FIXTURES / root}:/mnt"]
    return subprocess.run(
        [*argv, str(image), "--", *PRINT_ONE],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"USER": "root", "PATH": "/usr/bin:/bin"},
    )


def test_ch_run_is_stopped_on_an_old_driver(unpacked: Path, tmp_path: Path) -> None:
    done = ch_run(unpacked, "v100-r565", tmp_path)
    assert done.returncode == STOP_STATUS and "older than 580.65.06" in done.stderr, done.stderr


def test_ch_run_runs_on_a_good_driver(unpacked: Path, tmp_path: Path) -> None:
    done = ch_run(unpacked, "h100-r580", tmp_path)
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr
