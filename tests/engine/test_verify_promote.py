"""verify and promote on the real Engine: the smoke step in a throwaway container, and only passing
images labelled, tagged and pushed."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import PromoteError, VerifyError
from envbuild.image.promote import Promotion, promote, report_digest
from envbuild.image.verify import Verification, verify_image
from envbuild.oci.registry import resolve_digest
from tests.helpers.docker import TORCH_IMAGE, docker
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.docker

LR0_IMAGE = "envbuild-test/verify:lr0"


FORGED_FROM = "envbuild-test/verify:lr0-forged"  # a failing image, for reports that claim otherwise


REGISTRY = os.environ.get("ENVBUILD_TEST_REGISTRY") or "127.0.0.1:5000"


MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def smoke_containers(image: str = TORCH_IMAGE) -> list[str]:
    """This module's smoke containers (other users of the engine may run their own meanwhile)."""
    return docker(
        "ps", "-aq", "--filter", "label=io.envbuild.role=smoke", "--filter", f"ancestor={image}"
    ).stdout.split()


def image_id(ref: str) -> str:
    return docker("image", "inspect", ref, "--format", "{{.Id}}").stdout.strip()


def inspect(ref: str) -> dict:
    return json.loads(docker("image", "inspect", ref).stdout)[0]


@pytest.fixture(scope="module")
def passed_report(torch_report: Path) -> dict:
    """The session's passing CPU smoke report of the torch image (tests/engine/conftest.py)."""
    return json.loads(torch_report.read_text())["report"]


def test_verify_cpu_passes_and_leaves_no_container(torch_image: str) -> None:
    shown: list[str] = []
    verification = verify_image(torch_image, device="cpu", steps=10, timeout=300, say=shown.append)
    assert isinstance(verification, Verification)
    report = verification.report
    assert verification.passed is True and verification.exit_code == 0, report
    assert verification.device == "cpu" and verification.seconds > 0
    assert report["framework"] == "torch" and report["passed"] is True and report["failed"] == []
    assert report["device_used"] == "cpu" and report["steps"] == 10
    assert report["gates"]["training"] == "passed" and report["gates"]["import"] == "passed"
    assert report["gates"]["driver"].startswith("skipped")
    assert smoke_containers() == []
    # issue 32: the program's progress, shown while the container ran: the import, then its steps
    assert shown[0] == "smoke: importing torch" and shown[1].startswith("smoke: imported in ")
    steps = [line for line in shown if line.startswith("smoke: step ")]
    assert steps[0].startswith("smoke: step 1/10: loss ") and steps[-1].startswith("smoke: step 10/10: loss ")


def test_verify_gpu_without_toolkit_says_so_and_leaves_no_container(torch_image: str) -> None:
    with pytest.raises(VerifyError) as caught:
        verify_image(torch_image, device="gpu", steps=2, timeout=120)
    assert caught.value.message.startswith("this Docker host cannot give containers a GPU")
    assert "--smoke-device cpu" in caught.value.message
    assert smoke_containers() == []


def test_verify_timeout_kills_and_removes(torch_image: str) -> None:
    with pytest.raises(VerifyError, match=r"the smoke step did not finish within 1s") as caught:
        verify_image(torch_image, device="cpu", steps=100_000, timeout=1)
    assert "[smoke] timeout" in caught.value.fix
    assert smoke_containers() == []


def test_verify_missing_image() -> None:
    with pytest.raises(VerifyError, match="is not in this Docker Engine"):
        verify_image("envbuild-test/verify:does-not-exist", device="cpu", timeout=60)
    assert smoke_containers() == []


def test_a_failing_smoke_is_not_passed(torch_image: str) -> None:
    built = docker(
        "build",
        "-q",
        "-t",
        LR0_IMAGE,
        "-",
        input=f"FROM {torch_image}\nENV ENVBUILD_SMOKE_LR=0\n",
        check=False,
    )
    try:
        assert built.returncode == 0, built.stderr
        verification = verify_image(LR0_IMAGE, device="cpu", steps=5, timeout=300)
        assert smoke_containers(LR0_IMAGE) == []
    finally:
        docker("rmi", LR0_IMAGE, check=False)
    assert verification.passed is False and verification.exit_code != 0
    report = verification.report
    assert report["passed"] is False and report["gates"]["training"] == "failed"
    assert [failure["gate"] for failure in report["failed"]] == ["training"]


def test_the_users_checks_run_in_the_smoke_container_and_a_failed_one_fails_verify(
    torch_image: str, tmp_path: Path
) -> None:
    """[smoke] imports and command (issue 32), asked for on verify's command line: they run in the smoke
    container after the training step, as the image's own non-root user, and a failed one fails verify
    and is in the --report file that promote would read."""
    not_root = "python -c 'import os, sys, six; sys.exit(os.getuid() == 0)'"
    verification = verify_image(
        torch_image, device="cpu", steps=2, timeout=300, imports=("six", "json"), command=not_root
    )
    report = verification.report
    assert verification.passed is True, report["failed"]
    assert report["gates"]["training"] == "passed" and report["gates"]["checks"] == "passed"
    assert [(c["kind"], c["name"], c["passed"]) for c in report["checks"]] == [
        ("import", "six", True),
        ("import", "json", True),
        ("command", not_root, True),
    ]
    assert report["checks"][0]["version"] == "1.16.0"  # TORCH_SPEC's pin, as the image has it

    path = tmp_path / "smoke.json"
    argv = ["verify", torch_image, "--smoke-device", "cpu", "--steps", "2", "--report", str(path)]
    assert main([*argv, "--smoke-import", "envbuild_no_such_module"]) == 1
    saved = json.loads(path.read_text())["report"]
    assert saved["passed"] is False and saved["gates"]["checks"] == "failed"
    assert [(c["name"], c["passed"]) for c in saved["checks"]] == [("envbuild_no_such_module", False)]
    assert "No module named 'envbuild_no_such_module'" in saved["failed"][0]["detail"]
    assert smoke_containers() == []


@pytest.fixture
def promoted_cleanup(passed_report: dict):
    """Removes the tags a test lists, then any image labelled with this report's digest."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        docker("rmi", "--no-prune", ref, check=False)
    label = "label=io.envbuild.smoke.report-digest=" + report_digest(
        {"image": image_id(TORCH_IMAGE), "device": "cpu", "report": passed_report}
    )
    for leftover in set(docker("images", "-q", "--no-trunc", "--filter", label).stdout.split()):
        docker("rmi", "-f", leftover, check=False)


def delete_manifest(repository: str, digest: str) -> None:
    """Best effort: the registry may have deletion disabled."""
    import requests

    with contextlib.suppress(requests.exceptions.RequestException):
        requests.delete(f"http://{REGISTRY}/v2/{repository}/manifests/{digest}", timeout=30)


def test_promote_labels_tags_and_pushes(
    request: pytest.FixtureRequest, torch_image: str, passed_report: dict, promoted_cleanup: list[str]
) -> None:
    import requests

    verified = image_id(torch_image)
    ref = f"{REGISTRY}/envbuild-test/promoted:t1"
    promoted_cleanup.append(ref)
    promotion = promote(verified, tags=[ref], report=passed_report, device="cpu", push=True)
    assert isinstance(promotion, Promotion)
    assert promotion.image_id != verified and promotion.tags == (ref,)
    details = inspect(ref)
    assert details["Id"] == promotion.image_id
    assert details["Config"]["Labels"]["io.envbuild.verified"] == "true"
    assert details["Config"]["Labels"]["io.envbuild.smoke.device"] == "cpu"
    assert details["Config"]["Labels"]["io.envbuild.smoke.framework"] == "torch"
    document = {"image": verified, "device": "cpu", "report": passed_report}  # what verify --report writes
    assert details["Config"]["Labels"]["io.envbuild.smoke.report-digest"] == report_digest(document)
    # the image's own labels are kept, and a LABEL-only build adds no filesystem layer
    assert details["Config"]["Labels"]["io.envbuild.framework-version"] == "2.13.0"
    assert details["RootFS"]["Layers"] == inspect(verified)["RootFS"]["Layers"]
    assert details["Config"]["User"] == "10001:10001"
    assert details["Parent"] == verified  # one LABEL instruction: no intermediate image left behind

    [(pushed_ref, digest)] = promotion.pushed
    assert pushed_ref == ref and digest.startswith("sha256:")
    request.addfinalizer(lambda: delete_manifest("envbuild-test/promoted", digest))
    response = requests.get(
        f"http://{REGISTRY}/v2/envbuild-test/promoted/manifests/t1",
        headers={"Accept": MANIFEST_V2},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] == digest
    assert resolve_digest(ref) == digest


def test_promote_adds_the_audit_gates_verdicts_as_labels_and_nothing_else(
    torch_image: str, passed_report: dict, promoted_cleanup: list[str]
) -> None:
    ref = "envbuild-test/promoted-audit:t1"
    promoted_cleanup.append(ref)
    verdicts = {"io.envbuild.audit.sm_90": "native", "io.envbuild.audit.sm_75": "ptx-only"}
    smuggled = {"io.envbuild.verified": "false", "io.envbuild.smoke.device": "gpu"}  # not the gate's to set
    promote(
        image_id(torch_image), tags=[ref], report=passed_report, device="cpu", labels={**verdicts, **smuggled}
    )
    labels = inspect(ref)["Config"]["Labels"]
    assert {key: labels[key] for key in verdicts} == verdicts
    assert labels["io.envbuild.verified"] == "true" and labels["io.envbuild.smoke.device"] == "cpu"


def test_promote_refuses_a_failed_report(torch_image: str, passed_report: dict) -> None:
    failed = dict(passed_report, passed=False)
    with pytest.raises(PromoteError, match="only images whose smoke step passed"):
        promote(image_id(torch_image), tags=["envbuild-test/never:t"], report=failed, device="cpu")
    assert docker("image", "inspect", "envbuild-test/never:t", check=False).returncode != 0


def test_push_to_a_closed_port_fails_with_the_tag(
    torch_image: str, passed_report: dict, promoted_cleanup: list[str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ref = f"127.0.0.1:{port}/x/y:t"
    promoted_cleanup.append(ref)
    with pytest.raises(PromoteError) as caught:
        promote(image_id(torch_image), tags=[ref], report=passed_report, device="cpu", push=True, retries=1)
    assert caught.value.message.startswith(f"pushing {ref} failed: ")
    assert "docker login 127.0.0.1:" in caught.value.fix
    assert caught.value.pushed == ()
    # the local tag stays: callers record the failure, nothing is untagged
    assert docker("image", "inspect", ref, check=False).returncode == 0


# ---- reports as untrusted input: what `promote --report` accepts (issue 14, item 2) ----------------


def tag_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def verify_to(image: str, report: Path, steps: int = 10) -> int:
    """`envbuild verify IMAGE --report FILE` on the CPU; its exit code."""
    return main(["verify", image, "--smoke-device", "cpu", "--steps", str(steps), "--report", str(report)])


@pytest.fixture(scope="module")
def failing_image(torch_image: str) -> Iterator[str]:
    """An image whose smoke step fails (learning rate 0: the loss cannot decrease)."""
    docker("build", "-q", "-t", FORGED_FROM, "-", input=f"FROM {torch_image}\nENV ENVBUILD_SMOKE_LR=0\n")
    yield FORGED_FROM
    docker("rmi", FORGED_FROM, check=False)


def test_a_self_asserted_report_does_not_promote(
    failing_image: str, tmp_path: Path, images: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    forged = tmp_path / "forged.json"  # the issue's input, for an image whose smoke step fails
    issue = {"image": image_id(failing_image), "device": "gpu", "report": {"passed": True}}
    forged.write_text(json.dumps(issue))
    tag = "envbuild-test/forged:self-asserted"
    images.append(tag)
    code = main(["promote", failing_image, "--report", str(forged), "--tag", tag])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "envbuild verify" in err and "internal error" not in err
    assert not tag_exists(tag)


def test_an_edited_failing_report_does_not_promote(
    failing_image: str, tmp_path: Path, images: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "smoke.json"
    assert verify_to(failing_image, real, 5) == 1
    saved = json.loads(real.read_text())
    report = saved["report"]
    report.update(passed=True, failed=[], gates={**report["gates"], "training": "passed"})
    real.write_text(json.dumps(saved))  # the runner's file, edited to pass
    tag = "envbuild-test/forged:edited"
    images.append(tag)
    code = main(["promote", failing_image, "--report", str(real), "--tag", tag])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "report-digest" in err and "envbuild verify" in err
    assert not tag_exists(tag)


def test_a_report_for_another_image_does_not_promote(
    torch_image: str,
    torch_report: Path,
    failing_image: str,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = torch_report  # the torch image's passing report
    tag = "envbuild-test/forged:other-image"
    images.append(tag)
    code = main(["promote", failing_image, "--report", str(report), "--tag", tag])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"was made for {image_id(torch_image)[:19]}" in err and "envbuild verify" in err
    assert not tag_exists(tag)


def test_verify_report_names_the_image_and_its_digest_and_promotes(
    torch_image: str, torch_report: Path, images: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = torch_report  # what `envbuild verify IMAGE --report FILE` wrote (tests/engine/conftest.py)
    saved = json.loads(path.read_text())
    verified = image_id(torch_image)
    assert saved["image"] == verified and saved["device"] == "cpu"
    document = {key: saved[key] for key in ("image", "device", "report")}
    assert saved["report-digest"] == report_digest(document)
    tag = "envbuild-test/promoted:cli"
    images.append(tag)
    assert main(["promote", torch_image, "--report", str(path), "--tag", tag]) == 0, capsys.readouterr().err
    labels = inspect(tag)["Config"]["Labels"]
    assert labels["io.envbuild.verified"] == "true" and labels["io.envbuild.smoke.device"] == "cpu"
    assert labels["io.envbuild.smoke.report-digest"] == saved["report-digest"]


def test_promote_to_checks_the_report_against_the_registry_image(
    request: pytest.FixtureRequest,
    torch_image: str,
    torch_report: Path,
    anonymous_registry: str,
    tmp_path: Path,
    images: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The candidate pushed by digest, then promoted inside the registry with its verify report."""
    import requests

    path = torch_report
    candidate = f"{anonymous_registry}/envbuild-test/candidate:verify"
    images.append(candidate)
    docker("tag", torch_image, candidate)
    docker("push", candidate)
    digest = resolve_digest(candidate)
    request.addfinalizer(lambda: delete_manifest("envbuild-test/candidate", digest))
    source = f"{anonymous_registry}/envbuild-test/candidate@{digest}"
    run = uuid.uuid4().hex[:8]

    saved = json.loads(path.read_text())
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**saved, "device": "gpu"}))  # claims a GPU smoke step
    assert main(["promote", source, "--to", f"forged-{run}", "--report", str(forged)]) == 1
    assert "report-digest" in capsys.readouterr().err

    assert main(["promote", source, "--to", f"ok-{run}", "--report", str(path)]) == 0, capsys.readouterr().err
    assert resolve_digest(f"{anonymous_registry}/envbuild-test/candidate:ok-{run}") == digest
    tags = requests.get(f"http://{anonymous_registry}/v2/envbuild-test/candidate/tags/list", timeout=30)
    assert f"forged-{run}" not in tags.json()["tags"]


def test_verify_judges_a_passing_report_with_the_promotion_gates(torch_image: str, tmp_path: Path) -> None:
    """A smoke program that prints "passed" over losses that did not decrease: verify re-judges it with
    the same gates as promotion, so its report never reaches a report file."""
    report = json.loads((FIXTURES / "smoke" / "torch-cpu-lr0-failed.json").read_text())
    report.update(passed=True, failed=[], gates={**report["gates"], "training": "passed"})
    (tmp_path / "smoke.py").write_text(f"print({json.dumps(json.dumps(report))})\n")
    (tmp_path / "Dockerfile").write_text(f"FROM {torch_image}\nCOPY smoke.py /opt/envbuild/smoke.py\n")
    lying = "envbuild-test/verify:lying"
    docker("build", "-q", "-t", lying, str(tmp_path))
    try:
        with pytest.raises(VerifyError) as caught:
            verify_image(lying, device="cpu", steps=5, timeout=120)
        assert smoke_containers(lying) == []
    finally:
        docker("rmi", lying, check=False)
    assert caught.value.message.startswith("the smoke report says it passed, but report.losses: loss did not")
