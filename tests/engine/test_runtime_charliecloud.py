"""`envbuild verify REPO@sha256:... --runtime charliecloud`, for real: the torch wheelhouse image
pushed to the loopback registry, exported through Docker, unpacked with ch-convert and run with ch-run
on the CPU, once for the module (the export and unpack of a 1.2 GB image is most of this module's
time); every test reads that run's exit code, report file, record file and scratch directory. Then an
export that fails, and the registry-side promotion: the report promotes the digest it names, and an
edited or failed report promotes nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from envbuild.image.verify import report_digest, report_document
from envbuild.oci.registry import resolve_digest
from envbuild.runtime.charliecloud import EXPORT_ROLE
from tests.helpers.docker import docker
from tests.helpers.runtimeimages import pushed_torch_image

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/runtime-ch"


class Verified:
    """What the one `envbuild verify --runtime charliecloud` left: its exit code and stderr, the report
    and record files, the scratch root it ran under, and its wall time (reported, never asserted)."""

    def __init__(self, ref: str, directory: Path) -> None:
        self.ref = ref
        self.report_path = directory / "report.json"
        self.record_path = directory / "record.json"
        self.runtime_dir = directory / "runtime"
        self.runtime_dir.mkdir()
        env = {**os.environ, "ENVBUILD_RUNTIME_DIR": str(self.runtime_dir)}
        command = [sys.executable, "-m", "envbuild", "verify", ref, "--runtime", "charliecloud"]
        command += [
            "--smoke-device",
            "cpu",
            "--report",
            str(self.report_path),
            "--record",
            str(self.record_path),
        ]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        self.seconds = time.monotonic() - started
        self.code, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr

    @property
    def saved(self) -> dict:
        return json.loads(self.report_path.read_text())


@pytest.fixture(scope="module")
def candidate(torch_image: str, anonymous_registry: str) -> Iterator[str]:
    """The session's torch image by digest, in this module's repository: its promote tests tag there."""
    yield from pushed_torch_image(torch_image, anonymous_registry, REPOSITORY)


@pytest.fixture(scope="module")
def verified(candidate: str, tmp_path_factory: pytest.TempPathFactory) -> Verified:
    run = Verified(candidate, tmp_path_factory.mktemp("verified-ch"))
    print(f"\nverify --runtime charliecloud took {run.seconds:.1f} s", file=sys.stderr)
    return run


def test_verify_with_charliecloud_passes_with_the_gates_applied(verified: Verified) -> None:
    assert verified.code == 0, verified.stderr[-3000:]
    report = verified.saved["report"]
    assert report["passed"] is True and report["failed"] == []
    assert report["runtime"] == "charliecloud"
    assert report["gates"] and all(
        v == "passed" or v.startswith("skipped: ") for v in report["gates"].values()
    )
    assert report["gates"]["training"] == "passed"
    assert verified.saved["device"] == "cpu"
    assert "Traceback" not in verified.stderr


def test_the_report_names_the_registry_image_id(verified: Verified, anonymous_registry: str) -> None:
    manifest = requests.get(
        f"http://{anonymous_registry}/v2/{REPOSITORY}/manifests/{verified.ref.rsplit('@', 1)[1]}",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        timeout=30,
    ).json()
    saved = verified.saved
    assert saved["image"] == manifest["config"]["digest"]
    document = {key: saved[key] for key in ("image", "device", "report")}
    assert saved["report-digest"] == report_digest(document)


def test_the_record_names_runtime_host_and_report(verified: Verified) -> None:
    record = json.loads(verified.record_path.read_text())
    assert record["runtime"] == "charliecloud"
    assert record["host"] == socket.gethostname()
    assert record["image"] == verified.ref
    assert record["image-id"] == verified.saved["image"]
    assert record["report-digest"] == verified.saved["report-digest"]
    assert record["passed"] is True and record["failed"] == []


def export_containers() -> list[str]:
    """Containers the Docker path created to export an image (only this group's Charliecloud runs
    make them, one at a time)."""
    listed = docker("ps", "-aq", "--filter", f"label={EXPORT_ROLE}")
    return listed.stdout.split()


def test_nothing_is_left_unpacked(verified: Verified) -> None:
    assert verified.code == 0, verified.stderr[-3000:]
    assert sorted(os.listdir(verified.runtime_dir)) == []
    assert export_containers() == []  # the container made to export the image is gone too


def test_an_export_that_fails_names_its_step_and_leaves_no_container(
    candidate: str, verified: Verified, mounted, tmp_path: Path
) -> None:
    """The exported tarball does not fit the runtime directory (a 1 MB tmpfs): verify fails at that
    step, with its error, and the cleanup removes the container made to export and the scratch files."""
    small = mounted("size=1m")
    env = {**os.environ, "ENVBUILD_RUNTIME_DIR": str(small)}
    command = [sys.executable, "-m", "envbuild", "verify", candidate, "--runtime", "charliecloud"]
    done = subprocess.run([*command, "--smoke-device", "cpu"], capture_output=True, text=True, env=env)
    assert done.returncode == 1, done.stderr
    assert "charliecloud could not export the image's filesystem" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert export_containers() == []
    assert os.listdir(small) == []


def promote(ref: str, tag: str, report: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "envbuild", "promote", ref, "--to", tag, "--report", str(report)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def tags(registry: str) -> list[str]:
    listed = requests.get(f"http://{registry}/v2/{REPOSITORY}/tags/list", timeout=30).json()
    return listed.get("tags") or []


def test_an_edited_report_promotes_nothing(
    verified: Verified, anonymous_registry: str, tmp_path: Path
) -> None:
    saved = verified.saved
    saved["report"]["seconds"] = 0.001  # any edit: the report-digest no longer matches
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(saved))
    tag = f"edited-{uuid.uuid4().hex[:8]}"
    done = promote(verified.ref, tag, edited)
    assert done.returncode == 1, done.stderr
    assert "report-digest" in done.stderr and "Traceback" not in done.stderr
    assert tag not in tags(anonymous_registry)


def test_a_failed_report_promotes_nothing(
    verified: Verified, anonymous_registry: str, tmp_path: Path
) -> None:
    saved = verified.saved
    report = saved["report"]
    report.update(
        passed=False, failed=[{"gate": "training", "detail": "loss did not decrease", "hint": "none"}]
    )
    document = report_document(saved["image"], saved["device"], report)  # honestly digested, but failed
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({**document, "report-digest": report_digest(document)}))
    tag = f"failed-{uuid.uuid4().hex[:8]}"
    done = promote(verified.ref, tag, failed)
    assert done.returncode == 1, done.stderr
    assert "does not show a passing smoke step" in done.stderr and "Traceback" not in done.stderr
    assert tag not in tags(anonymous_registry)


def test_the_passing_report_promotes_the_same_digest(verified: Verified, anonymous_registry: str) -> None:
    tag = f"verified-ch-{uuid.uuid4().hex[:8]}"
    done = promote(verified.ref, tag, verified.report_path)
    assert done.returncode == 0, done.stderr
    repo, digest = verified.ref.rsplit("@", 1)
    assert resolve_digest(f"{repo}:{tag}") == digest
