"""verify and promote against a real Docker Engine (no NVIDIA runtime) and a local registry.

A torch CPU image is rendered and built once per module from the local Debian base (see
test_render_docker), or reused when its tag is already there. The registry is Debian's
docker-registry on 127.0.0.1:5000 unless ENVBUILD_TEST_REGISTRY names another.
"""

from __future__ import annotations

import hashlib

import pytest

from envbuild.errors import PromoteError, UsageError, VerifyError
from envbuild.image.promote import promote, report_digest
from envbuild.image.verify import explain_engine_error, verify_image
from envbuild.oci.reference import split_tag

# bookworm_image and wheelhouse are fixtures, used by name

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
