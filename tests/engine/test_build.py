"""`envbuild build` end to end on the real Engine and a real registry on 127.0.0.1: a torch image built
air-gapped from a local Debian base, verified with the CPU smoke step, promoted and pushed; and the
faults that must leave no tag: a failing smoke step, no GPU toolkit, an interrupt, a registry down.

Each test runs an `envbuild build` of its own, not the session's torch image: the build, with the
stage it breaks or the signal it gets, is what the test is about. They share TORCH_SPEC's context, so
after the first the Engine's build cache answers their docker builds; the API backend's classic
builder has a cache of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from envbuild.image.verify import report_digest
from tests.helpers.docker import TORCH_SPEC, docker, wait_while_running
from tests.helpers.registry import free_port
from tests.helpers.signals import default_signals

pytestmark = pytest.mark.docker
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def spec_for(tmp_path: Path, repository: str, extra: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(
        TORCH_SPEC
        + f'\n[image]\nrepository = "{repository}"\ntags = ["torch{{framework_version}}-e2e"]\n'
        + extra
    )
    return path


def run_build(spec: Path, out: Path, wheelhouse: Path, base: str, *args: str) -> int:
    return main(
        [
            "build",
            "-f",
            str(spec),
            "-o",
            str(out),
            "--wheelhouse",
            str(wheelhouse),
            "--base-image",
            base,
            "--smoke-device",
            "cpu",
            *args,
        ]
    )


def tag_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def smoke_containers() -> list[str]:
    return docker("ps", "-aq", "--filter", "label=io.envbuild.role=smoke").stdout.split()


def running_smoke_containers(repository: str) -> list[str]:
    """Smoke containers of this test's image (other tests may run their own on the same engine): the
    build's image is untagged while it is verified, so they are found by the image's label instead."""
    found = docker("ps", "-aq", "--filter", "label=io.envbuild.role=smoke").stdout.split()
    return [
        cid
        for cid in found
        if repository in docker("inspect", cid, "--format", "{{json .Config.Labels}}", check=False).stdout
    ]


def record(out: Path) -> dict:
    return json.loads((out / "default" / "record.json").read_text())


@pytest.fixture
def cleanup():
    tags: list[str] = []
    yield tags
    for tag in tags:
        docker("rmi", "-f", tag, check=False)


def test_build_verify_promote_push(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    anonymous_registry: str,
    cleanup: list[str],
    capsys,
) -> None:
    repository = f"{anonymous_registry}/envbuild-test/e2e"
    tag = f"{repository}:torch2.13.0-e2e"
    cleanup.append(tag)
    out = tmp_path / "build"
    code = run_build(spec_for(tmp_path, repository), out, wheelhouse, bookworm_image, "--push")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rec = record(out)
    assert rec["ok"] is True and rec["status"] == "promoted" and rec["smoke"]["passed"] is True
    assert set(rec["stages"]) == {"render", "build", "audit", "verify", "promote"} and rec["engine"]
    # the audit gate ran on the CPU runner: torch's CPU wheel has no device code, and no GPU was asked
    assert rec["audit"]["framework"] == "torch" and rec["audit"]["gpus"] == {}
    assert rec["audit"]["warnings"] == [
        "no device code in torch's libraries: a CPU build, so no GPU gets a verdict"
    ]
    labels = json.loads(docker("image", "inspect", tag, "--format", "{{json .Config.Labels}}").stdout)
    assert labels["io.envbuild.verified"] == "true" and labels["io.envbuild.smoke.device"] == "cpu"
    # the record, the label and a `verify --report` file carry one digest of {image, device, report}
    assert rec["report_digest"] == labels["io.envbuild.smoke.report-digest"]
    assert rec["report_digest"] == report_digest(
        {"image": rec["images"]["built"], "device": "cpu", "report": rec["smoke"]}
    )
    (pushed,) = rec["pushed"]
    response = requests.get(
        f"http://{anonymous_registry}/v2/envbuild-test/e2e/manifests/torch2.13.0-e2e",
        headers={"Accept": MANIFEST_V2},
        timeout=30,
    )
    assert response.headers["Docker-Content-Digest"] == pushed["digest"]
    by_digest = f"{repository}@{pushed['digest']}"
    docker("pull", by_digest)
    assert (
        docker("image", "inspect", by_digest, "--format", "{{.Id}}").stdout.strip()
        == rec["images"]["promoted"]
    )
    assert "verified on CPU only" in printed.out


def test_a_gpu_target_built_from_a_cpu_wheel_passes_the_audit_gate_with_a_warning_and_no_verdict(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    capsys,
) -> None:
    repository = "envbuild-test/audited"
    tag = f"{repository}:torch2.13.0-e2e"
    cleanup.append(tag)
    spec = spec_for(tmp_path, repository)
    spec.write_text(spec.read_text().replace('driver = "580"\n', 'driver = "580"\ngpus = ["H100"]\n', 1))
    out = tmp_path / "build"
    code = run_build(spec, out, wheelhouse, bookworm_image)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rec = record(out)
    assert rec["stages"]["audit"]["ok"] is True
    assert rec["audit"]["gpus"] == {
        "sm_90": {"names": ["H100"], "compute_capability": "9.0", "verdict": None}
    }
    assert "default: audit: sm_90 (H100): no verdict" in printed.out
    assert "audit: warning: no device code in torch's libraries" in printed.out
    labels = json.loads(docker("image", "inspect", tag, "--format", "{{json .Config.Labels}}").stdout)
    assert not [key for key in labels if key.startswith("io.envbuild.audit.")]


def test_failing_smoke_step_gets_no_tag(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    capsys,
) -> None:
    repository = "envbuild-test/failing"
    cleanup.append(f"{repository}:torch2.13.0-e2e")
    out = tmp_path / "build"
    spec = spec_for(tmp_path, repository, 'env = { ENVBUILD_SMOKE_LR = "0" }\n')  # the loss cannot decrease
    code = run_build(spec, out, wheelhouse, bookworm_image)
    err = capsys.readouterr().err
    assert code == 1 and "smoke step failed" in err and "training" in err
    rec = record(out)
    assert rec["status"] == "failed" and rec["tags"] == []
    assert [f["gate"] for f in rec["smoke"]["failed"]] == ["training"]
    assert not tag_exists(f"{repository}:torch2.13.0-e2e")
    assert smoke_containers() == []


def test_gpu_smoke_on_an_engine_without_the_toolkit(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    capsys,
) -> None:
    repository = "envbuild-test/notoolkit"
    cleanup.append(f"{repository}:torch2.13.0-e2e")
    out = tmp_path / "build"
    code = main(
        [
            "build",
            "-f",
            str(spec_for(tmp_path, repository)),
            "-o",
            str(out),
            "--wheelhouse",
            str(wheelhouse),
            "--base-image",
            bookworm_image,
            "--smoke-device",
            "gpu",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "cannot give containers a GPU" in err and "NVIDIA Container Toolkit" in err
    assert not tag_exists(f"{repository}:torch2.13.0-e2e") and smoke_containers() == []
    assert record(out)["status"] == "failed"


@pytest.mark.parametrize(
    ("sent", "exit_code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_a_signal_during_verify_leaves_nothing(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    sent: signal.Signals,
    exit_code: int,
) -> None:
    """Ctrl-C, CI cancellation and Kubernetes (SIGTERM), a closed terminal (SIGHUP): the same cleanup,
    and the exit code 128 + the signal's number."""
    repository = f"envbuild-test/interrupted-{sent.name.lower()}"
    cleanup.append(f"{repository}:torch2.13.0-e2e")
    spec = (
        spec_for(tmp_path, repository).read_text().replace('device = "cpu"', 'device = "cpu"\nsteps = 9000')
    )
    (tmp_path / "envbuild.toml").write_text(spec)
    out = tmp_path / "build"
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("envbuild")),
            "build",
            "-f",
            str(tmp_path / "envbuild.toml"),
            "-o",
            str(out),
            "--wheelhouse",
            str(wheelhouse),
            "--base-image",
            bookworm_image,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals(),
    )
    wait_while_running(process, lambda: running_smoke_containers(repository))
    process.send_signal(sent)
    _, err = process.communicate(timeout=120)
    assert process.returncode == exit_code, err
    assert f"interrupted by {sent.name}" in err and "internal error" not in err
    assert not running_smoke_containers(repository)
    assert not tag_exists(f"{repository}:torch2.13.0-e2e")
    rec = record(out)
    assert (
        rec["status"] == "interrupted" and rec["error"] == f"interrupted by {sent.name}" and rec["tags"] == []
    )


def test_sigterm_during_envbuild_verify_removes_the_container(
    tmp_path: Path, bookworm_image: str, wheelhouse: Path, cleanup: list[str]
) -> None:
    repository = "envbuild-test/verify-sigterm"
    image = f"{repository}:torch2.13.0-e2e"
    cleanup.append(image)
    assert run_build(spec_for(tmp_path, repository), tmp_path / "build", wheelhouse, bookworm_image) == 0
    report = tmp_path / "smoke.json"
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("envbuild")),
            "verify",
            image,
            "--smoke-device",
            "cpu",
            "--steps",
            "10000",  # the most --steps takes; the signal comes long before the end
            "--report",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals(),
    )
    wait_while_running(process, lambda: running_smoke_containers(repository))
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert not running_smoke_containers(repository) and not report.exists()


def test_registry_down_fails_the_push_and_keeps_no_tag(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    capsys,
) -> None:
    repository = f"127.0.0.1:{free_port()}/envbuild-test/down"
    cleanup.append(f"{repository}:torch2.13.0-e2e")
    out = tmp_path / "build"
    code = run_build(spec_for(tmp_path, repository), out, wheelhouse, bookworm_image, "--push")
    err = capsys.readouterr().err
    assert code == 1 and "pushing" in err
    rec = record(out)
    assert rec["status"] == "failed" and rec["pushed"] == [] and rec["tags"] == []
    assert not tag_exists(f"{repository}:torch2.13.0-e2e")


def test_api_backend_builds_the_same_example(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    cleanup: list[str],
    capsys,
) -> None:
    repository = "envbuild-test/api"
    cleanup.append(f"{repository}:torch2.13.0-e2e")
    out = tmp_path / "build"
    code = run_build(spec_for(tmp_path, repository), out, wheelhouse, bookworm_image, "--builder", "api")
    assert code == 0, capsys.readouterr().err
    rec = record(out)
    assert rec["backend"] == "api" and rec["ok"] is True
    dockerfile = (out / "default" / "Dockerfile").read_text()
    assert "--mount" not in dockerfile and "COPY wheels/framework /wheels/framework" in dockerfile
    # no mounts, so no uv: it would stay in a COPY layer (issue 18); pip installs instead
    assert "envbuild-uv" not in dockerfile and "RUN pip install --no-cache-dir" in dockerfile
    assert tag_exists(f"{repository}:torch2.13.0-e2e")
    assert os.path.getsize(out / "default" / "build.log") > 0


def test_parallel_targets_and_one_broken(
    tmp_path: Path, bookworm_image: str, wheelhouse: Path, cleanup: list[str], capsys
) -> None:
    repository = "envbuild-test/parallel"
    spec = (
        spec_for(tmp_path, repository)
        .read_text()
        .replace('tags = ["torch{framework_version}-e2e"]', 'tags = ["{target}-e2e"]')
    )
    good = spec + '\n[[target]]\nname = "one"\n\n[[target]]\nname = "two"\n'
    (tmp_path / "envbuild.toml").write_text(good)
    cleanup += [f"{repository}:one-e2e", f"{repository}:two-e2e"]
    out = tmp_path / "build"
    assert run_build(tmp_path / "envbuild.toml", out, wheelhouse, bookworm_image, "--all", "-j", "2") == 0
    printed = capsys.readouterr().out
    assert "[one]" in printed and "[two]" in printed  # prefixed lines from both builds
    table = printed.splitlines()[-3:]
    assert table[0].startswith("target") and table[1].startswith("one") and table[2].startswith("two")
    assert tag_exists(f"{repository}:one-e2e") and tag_exists(f"{repository}:two-e2e")

    broken = good.replace('name = "two"\n', 'name = "two"\npython = "3.12"\n')  # not debian12's python3
    (tmp_path / "envbuild.toml").write_text(broken)
    docker("rmi", "-f", f"{repository}:one-e2e", check=False)
    assert run_build(tmp_path / "envbuild.toml", out, wheelhouse, bookworm_image, "--all", "-j", "2") == 1
    captured = capsys.readouterr()
    assert "debian12's python3" in captured.err
    assert tag_exists(f"{repository}:one-e2e")  # the other target still built and was promoted
    rows = captured.out.splitlines()[-2:]
    assert rows[0].split()[:2] == ["one", "promoted"] and rows[1].split()[:2] == ["two", "failed"]
