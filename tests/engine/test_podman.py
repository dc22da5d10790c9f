"""`--engine podman` end to end with Debian's real podman (4.3) and the real registry on 127.0.0.1
(issue 37): the torch CPU image built by `podman build` from the wheelhouse, its CPU smoke step run
through Podman's API, tagged and pushed, then promoted by digest; a failing smoke step that tags
nothing; a GPU smoke step without a CDI spec (exit 1, the nvidia-ctk fix), and with one envbuild reads
but podman does not (podman's own refusal); a SIGTERM during the build that leaves no buildah
container. No podman.socket runs here: envbuild starts podman's API service itself, as it does on a
login node without systemd, and every test checks that none is left behind.

The podman storage gets the Docker tests' debootstrap base through `podman pull docker-daemon:`, the
one copy from one engine to the other; everything else each test builds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.engine import close_engines
from tests.helpers.docker import BASE_IMAGE, TORCH_SPEC
from tests.helpers.registry import manifest_digest

pytestmark = pytest.mark.docker

CDI_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
NO_SPEC = (
    "no CDI device nvidia.com/gpu on this host: generate one with "
    "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
)


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=600, check=False)
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done


def services() -> list[str]:
    """The `podman system service` processes envbuild started (their sockets are envbuild's own)."""
    found = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in found.splitlines() if "system service" in line and "envbuild-podman-" in line]


def smoke_containers() -> list[str]:
    return podman("ps", "-aq", "--filter", "label=io.envbuild.role=smoke").stdout.split()


@pytest.fixture(scope="module", autouse=True)
def on_podman() -> Iterator[None]:
    """Every envbuild command of this module runs on Podman: its images, build containers and smoke
    containers are in Podman's own storage, which the engine group's Docker-wide counts never see, so
    the module runs in the engine-apart group (tests/helpers/parallel.py PODMAN_MODULES)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENVBUILD_ENGINE", "podman")
        yield


@pytest.fixture(scope="module")
def podman_base(bookworm_image: str) -> str:
    """The Docker tests' bookworm base, copied into podman's storage."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: apt-get install podman (.ci/run installs it)")
    if podman("image", "exists", bookworm_image, check=False).returncode != 0:
        podman("pull", "-q", f"docker-daemon:{bookworm_image}")
    return bookworm_image


@pytest.fixture
def no_service_left() -> Iterator[None]:
    """Each test ends with no podman service of envbuild's running (in-process ones stop with the
    engine; a subprocess's with its exit)."""
    yield
    close_engines()
    assert services() == []


def spec_for(tmp_path: Path, repository: str, extra: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(
        TORCH_SPEC + f'\n[image]\nrepository = "{repository}"\ntags = ["e2e"]\n' + extra, encoding="utf-8"
    )
    return path


def build(spec: Path, out: Path, wheelhouse: Path, *args: str) -> int:
    flags = ["-f", str(spec), "-o", str(out), "--wheelhouse", str(wheelhouse), "--base-image", BASE_IMAGE]
    return main(["build", *flags, "--smoke-device", "cpu", *args])


def record(out: Path) -> dict:
    return json.loads((out / "default" / "record.json").read_text())


@pytest.fixture(scope="module")
def pushed(
    tmp_path_factory: pytest.TempPathFactory, podman_base: str, wheelhouse: Path, anonymous_registry: str
) -> Iterator[tuple[str, dict]]:
    """`envbuild build --push` with `[build] engine = "podman"` in envbuild.toml: (repository, record)."""
    tmp = tmp_path_factory.mktemp("podman-build")
    repository = f"{anonymous_registry}/envbuild-test/podman-{uuid.uuid4().hex[:8]}"
    spec = spec_for(tmp, repository, '\n[build]\nengine = "podman"\n')
    out = tmp / "build"
    assert build(spec, out, wheelhouse, "--push") == 0
    yield repository, record(out)
    podman("rmi", "-f", f"{repository}:e2e", check=False)


def test_podman_builds_verifies_tags_and_pushes(pushed: tuple[str, dict], no_service_left: None) -> None:
    repository, rec = pushed
    assert rec["status"] == "promoted" and rec["backend"] == "podman" and rec["engine"].startswith("podman ")
    assert rec["smoke"]["passed"] is True and rec["smoke"]["runtime"] == "podman"
    assert rec["tags"] == [f"{repository}:e2e"]
    labels = json.loads(
        podman("image", "inspect", f"{repository}:e2e", "--format", "{{json .Labels}}").stdout
    )
    assert labels["io.envbuild.verified"] == "true" and labels["io.envbuild.smoke.device"] == "cpu"
    host, _, repo = repository.partition("/")
    digest = manifest_digest(host, repo, "e2e")  # what the registry holds under the tag
    assert rec["pushed"] == [{"tag": f"{repository}:e2e", "digest": digest}]
    assert smoke_containers() == []


def test_promote_by_digest_works_on_what_podman_pushed(
    pushed: tuple[str, dict], no_service_left: None
) -> None:
    repository, rec = pushed
    digest = rec["pushed"][0]["digest"]
    assert main(["promote", f"{repository}@{digest}", "--to", f"{repository}:promoted"]) == 0
    host, _, repo = repository.partition("/")
    assert manifest_digest(host, repo, "promoted") == digest


def test_a_failing_smoke_step_tags_nothing(
    tmp_path: Path,
    podman_base: str,
    wheelhouse: Path,
    capsys: pytest.CaptureFixture[str],
    no_service_left: None,
) -> None:
    repository = f"envbuild-test/podman-failing-{uuid.uuid4().hex[:8]}"
    spec = spec_for(tmp_path, repository, 'env = { ENVBUILD_SMOKE_LR = "0" }\n')  # the loss cannot decrease
    out = tmp_path / "build"
    code = build(spec, out, wheelhouse, "--engine", "podman")
    err = capsys.readouterr().err
    assert code == 1 and "smoke step failed" in err and "training" in err
    rec = record(out)
    assert rec["status"] == "failed" and rec["tags"] == [] and rec["backend"] == "podman"
    assert podman("image", "exists", f"{repository}:e2e", check=False).returncode == 1
    assert smoke_containers() == []


def verify_gpu(image: str, specs: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENVBUILD_CDI_SPEC_DIRS": str(CDI_FIXTURES / specs), "ENVBUILD_ENGINE": "podman"}
    command = [sys.executable, "-m", "envbuild", "verify", image, "--smoke-device", "gpu"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)


def test_gpu_smoke_without_a_cdi_spec_exits_1_with_the_fix(
    pushed: tuple[str, dict], no_service_left: None
) -> None:
    repository, _ = pushed
    done = verify_gpu(f"{repository}:e2e", "empty")
    assert done.returncode == 1 and NO_SPEC in done.stderr and "Traceback" not in done.stderr
    assert "--gpu-access legacy" not in done.stderr  # Podman has no legacy path to offer
    assert smoke_containers() == []


def test_gpu_smoke_asks_podman_for_the_cdi_device_and_reports_its_refusal(
    pushed: tuple[str, dict], no_service_left: None
) -> None:
    """envbuild reads the fixture's spec and asks for nvidia.com/gpu=all through libpod's create;
    podman reads /etc/cdi, which has none here, and its own words come back."""
    repository, _ = pushed
    done = verify_gpu(f"{repository}:e2e", "nvidia")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "this Podman did not give the container the CDI device nvidia.com/gpu=all" in done.stderr
    assert "unresolvable CDI devices nvidia.com/gpu=all" in done.stderr
    assert smoke_containers() == []


def test_legacy_gpu_access_is_refused_on_podman(pushed: tuple[str, dict], no_service_left: None) -> None:
    repository, _ = pushed
    code = main(
        [
            "verify",
            f"{repository}:e2e",
            "--engine",
            "podman",
            "--smoke-device",
            "gpu",
            "--gpu-access",
            "legacy",
        ]
    )
    assert code == 1 and smoke_containers() == []


def test_sigterm_during_podman_build_leaves_no_build_container_and_no_tag(
    tmp_path: Path, podman_base: str, wheelhouse: Path, no_service_left: None
) -> None:
    repository = f"envbuild-test/podman-signal-{uuid.uuid4().hex[:8]}"
    spec = spec_for(tmp_path, repository)
    out = tmp_path / "build"
    before = set(podman("ps", "-aq", "--external").stdout.split())
    command = [
        sys.executable,
        "-m",
        "envbuild",
        "build",
        "-f",
        str(spec),
        "-o",
        str(out),
        "--engine",
        "podman",
    ]
    command += [
        "--wheelhouse",
        str(wheelhouse),
        "--base-image",
        BASE_IMAGE,
        "--smoke-device",
        "cpu",
        "--no-cache",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "default" / "build.log"
    try:
        while not (log.exists() and "STEP 4/" in log.read_text(errors="replace")):  # apt-get is running
            assert process.poll() is None, process.communicate()[1][-2000:]
            subprocess.run(["sleep", "0.2"], check=True)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "Traceback" not in err
    assert set(podman("ps", "-aq", "--external").stdout.split()) <= before  # buildah's step container is gone
    assert podman("image", "exists", f"{repository}:e2e", check=False).returncode == 1
    assert record(out)["tags"] == []


def test_doctor_reports_podman_its_mode_and_that_gpus_need_a_cdi_spec(
    podman_base: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_service_left: None,
) -> None:
    monkeypatch.setenv("ENVBUILD_CDI_SPEC_DIRS", str(CDI_FIXTURES / "empty"))
    assert main(["doctor", "--engine", "podman", "--no-gpu", "--json"]) == 0
    checks = {check["name"]: check for check in json.loads(capsys.readouterr().out)["checks"]}
    mode = "rootful" if os.geteuid() == 0 else "rootless"
    assert checks["podman"]["status"] == "ok" and f", {mode}, API at unix://" in checks["podman"]["evidence"]
    assert (
        checks["podman build"]["status"] == "ok"
        and "buildkit" not in checks
        and "docker engine" not in checks
    )
    main(["doctor", "--engine", "podman", "--json"])  # with the GPU steps: fails, no GPU here
    checks = {check["name"]: check for check in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["GPU path"]["status"] == "fail"
    assert checks["GPU path"]["evidence"] == (
        "Podman reaches GPUs only through CDI, and no spec names nvidia.com/gpu=all"
    )
    assert (
        checks["GPU path"]["fix"]
        == "generate one with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
    )
    assert checks["nvidia runtime"]["status"] == "skip"
