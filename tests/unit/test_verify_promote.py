"""verify and promote against a real Docker Engine (no NVIDIA runtime) and a local registry.

A torch CPU image is rendered and built once per module from the local Debian base (see
test_render_docker), or reused when its tag is already there. The registry is Debian's
docker-registry on 127.0.0.1:5000 unless ENVBUILD_TEST_REGISTRY names another.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
from collections.abc import Iterator

import pytest

from envbuild.errors import PromoteError, UsageError, VerifyError
from envbuild.image.promote import Promotion, promote, report_digest
from envbuild.image.verify import Verification, explain_engine_error, verify_image
from envbuild.oci.reference import split_tag
from envbuild.oci.registry import resolve_digest

# bookworm_image and wheelhouse are fixtures, used by name
from tests.test_render_docker import (
    SPEC,
    bookworm_image,
    docker,
    render_and_build,
    wheelhouse,
)

TORCH_IMAGE = "envbuild-test/verify:torch"
LR0_IMAGE = "envbuild-test/verify:lr0"
REGISTRY = os.environ.get("ENVBUILD_TEST_REGISTRY") or "127.0.0.1:5000"
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"

NO_GPU_TEXT = (
    "500 Server Error for http+docker://localhost/v1.41/containers/0123456789ab/start: "
    'Internal Server Error ("could not select device driver "" with capabilities: [[gpu]]")'
)
UNSATISFIED_TEXT = (
    "OCI runtime create failed: container_linux.go:380: starting container process caused: "
    "process_linux.go:545: container init caused: Running hook #0:: error running hook: exit status 1, "
    "stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, "
    "please update your driver to a newer version, or use an earlier cuda container: unknown"
)
UNSATISFIED_NEW_TEXT = (
    "failed to create task for container: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: error running "
    "hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
    "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.5, please update your "
    "driver to a newer version, or use an earlier cuda container: unknown"
)


# ---- pure functions -----------------------------------------------------------------------------


def test_explain_no_gpu_runtime() -> None:
    error = explain_engine_error(NO_GPU_TEXT)
    assert isinstance(error, VerifyError)
    assert error.message == (
        "this Docker host cannot give containers a GPU: install or configure the NVIDIA Container "
        "Toolkit, or use `--smoke-device cpu` on CPU-only CI"
    )
    assert error.fix and "nvidia-ctk" in error.fix


def test_explain_unsatisfied_cuda_condition_names_the_driver_floor() -> None:
    error = explain_engine_error(UNSATISFIED_TEXT)
    assert isinstance(error, VerifyError)
    assert error.message == "the host driver is too old for this image: needs >= 550.54.14 (CUDA 12.4)"
    # a minor the matrix knows no driver floor for falls back to naming the CUDA minimum
    unknown = explain_engine_error(UNSATISFIED_NEW_TEXT)
    assert isinstance(unknown, VerifyError)
    assert (
        unknown.message
        == "the host driver is too old for this image: needs the CUDA 13.5 minimum (CUDA 13.5)"
    )
    floor = explain_engine_error(UNSATISFIED_TEXT.replace("cuda>=12.4", "cuda>=12.8"))
    assert floor is not None and "needs >= 570.26 (CUDA 12.8)" in floor.message


def test_explain_other_errors_is_none() -> None:
    assert explain_engine_error("No such image: nope:latest") is None
    assert explain_engine_error("") is None


def test_report_digest_is_canonical() -> None:
    report = {"b": [1, 2], "a": {"y": True, "x": None}}
    canonical = b'{"a":{"x":null,"y":true},"b":[1,2]}'
    assert report_digest(report) == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert report_digest(dict(reversed(list(report.items())))) == report_digest(report)


def test_split_tag() -> None:
    assert split_tag("127.0.0.1:5000/team/img:v1") == ("127.0.0.1:5000/team/img", "v1")
    assert split_tag("127.0.0.1:5000/team/img") == ("127.0.0.1:5000/team/img", "latest")
    assert split_tag("img:2") == ("img", "2")


def test_promote_refuses_a_failed_report_before_touching_docker() -> None:
    with pytest.raises(PromoteError, match="only images whose smoke step passed are promoted"):
        promote("sha256:" + "0" * 64, tags=["x/y:z"], report={"passed": False}, device="cpu")
    with pytest.raises(PromoteError, match="only images whose smoke step passed"):
        promote("sha256:" + "0" * 64, tags=["x/y:z"], report={}, device="cpu")


def test_verify_rejects_an_unknown_device() -> None:
    with pytest.raises(UsageError, match="smoke device 'tpu'"):
        verify_image("whatever", device="tpu")


# ---- Docker -------------------------------------------------------------------------------------


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
def torch_image(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, bookworm_image: str
) -> Iterator[str]:
    if docker("image", "inspect", TORCH_IMAGE, check=False).returncode == 0:
        yield TORCH_IMAGE
        return
    house = request.getfixturevalue("wheelhouse")
    render_and_build(tmp_path_factory.mktemp("verify"), SPEC, house, bookworm_image, TORCH_IMAGE)
    yield TORCH_IMAGE
    docker("rmi", TORCH_IMAGE, check=False)


@pytest.fixture(scope="module")
def passed_report(torch_image: str) -> dict:
    verification = verify_image(torch_image, device="cpu", steps=10, timeout=300)
    assert verification.passed, verification.report
    return verification.report


@pytest.mark.docker
def test_verify_cpu_passes_and_leaves_no_container(torch_image: str) -> None:
    verification = verify_image(torch_image, device="cpu", steps=10, timeout=300)
    assert isinstance(verification, Verification)
    report = verification.report
    assert verification.passed is True and verification.exit_code == 0, report
    assert verification.device == "cpu" and verification.seconds > 0
    assert report["framework"] == "torch" and report["passed"] is True and report["failed"] == []
    assert report["device_used"] == "cpu" and report["steps"] == 10
    assert report["gates"]["training"] == "passed" and report["gates"]["import"] == "passed"
    assert report["gates"]["driver"].startswith("skipped")
    assert smoke_containers() == []


@pytest.mark.docker
def test_verify_gpu_without_toolkit_says_so_and_leaves_no_container(torch_image: str) -> None:
    with pytest.raises(VerifyError) as caught:
        verify_image(torch_image, device="gpu", steps=2, timeout=120)
    assert caught.value.message.startswith("this Docker host cannot give containers a GPU")
    assert "--smoke-device cpu" in caught.value.message
    assert smoke_containers() == []


@pytest.mark.docker
def test_verify_timeout_kills_and_removes(torch_image: str) -> None:
    with pytest.raises(VerifyError, match=r"the smoke step did not finish within 1s") as caught:
        verify_image(torch_image, device="cpu", steps=100_000, timeout=1)
    assert "[smoke] timeout" in caught.value.fix
    assert smoke_containers() == []


@pytest.mark.docker
def test_verify_missing_image() -> None:
    with pytest.raises(VerifyError, match="is not in this Docker Engine"):
        verify_image("envbuild-test/verify:does-not-exist", device="cpu", timeout=60)
    assert smoke_containers() == []


@pytest.mark.docker
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


@pytest.fixture
def promoted_cleanup(passed_report: dict):
    """Removes the tags a test lists, then any image labelled with this report's digest."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        docker("rmi", "--no-prune", ref, check=False)
    label = f"label=io.envbuild.smoke.report-digest={report_digest(passed_report)}"
    for leftover in set(docker("images", "-q", "--no-trunc", "--filter", label).stdout.split()):
        docker("rmi", "-f", leftover, check=False)


def delete_manifest(repository: str, digest: str) -> None:
    """Best effort: the registry may have deletion disabled."""
    import requests

    with contextlib.suppress(requests.exceptions.RequestException):
        requests.delete(f"http://{REGISTRY}/v2/{repository}/manifests/{digest}", timeout=30)


@pytest.mark.docker
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
    assert details["Config"]["Labels"]["io.envbuild.smoke.report-digest"] == report_digest(passed_report)
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


@pytest.mark.docker
def test_promote_refuses_a_failed_report(torch_image: str, passed_report: dict) -> None:
    failed = dict(passed_report, passed=False)
    with pytest.raises(PromoteError, match="only images whose smoke step passed"):
        promote(image_id(torch_image), tags=["envbuild-test/never:t"], report=failed, device="cpu")
    assert docker("image", "inspect", "envbuild-test/never:t", check=False).returncode != 0


@pytest.mark.docker
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
