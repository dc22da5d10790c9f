"""The SBOM from a real build record (tests/fixtures/attest/record.json, written by the end-to-end
engine test) and a real inventory capture of a torch 2.13.0 image (inventory-torch.txt)."""

from __future__ import annotations

import copy
import json

import pytest

from envbuild.attest import fields
from envbuild.attest.record import BuildRecord
from envbuild.attest.sbom import build_sbom, sbom_json, validate_sbom
from envbuild.errors import EnvbuildError
from envbuild.image.inventory import CondaPackage, Inventory, parse_inventory
from tests.helpers.paths import FIXTURES

RECORD = json.loads((FIXTURES / "attest" / "record.json").read_text(encoding="utf-8"))
CAPTURE = (FIXTURES / "attest" / "inventory-torch.txt").read_text(encoding="utf-8")
INVENTORY = parse_inventory(CAPTURE, CAPTURE.split("\n", 1)[0].rsplit(" ", 1)[0], {})
REPOSITORY = "127.0.0.1:5000/envbuild-test/e2e"
DIGEST = RECORD["pushed"][0]["digest"]
SUBJECT = (REPOSITORY, DIGEST)


@pytest.fixture(scope="module")
def sbom() -> dict:
    return build_sbom(BuildRecord.from_json(RECORD), INVENTORY, subject=SUBJECT)


def component(sbom: dict, role: str, name: str) -> dict:
    found = [
        c
        for c in sbom["components"]
        if c["name"] == name and {"name": fields.P_COMPONENT_ROLE, "value": role} in c.get("properties", [])
    ]
    assert len(found) == 1, [c["name"] for c in sbom["components"]]
    return found[0]


def test_the_sbom_validates_as_cyclonedx_1_6_and_is_reproducible(sbom: dict) -> None:
    data = sbom_json(sbom)
    validate_sbom(data)
    assert sbom["specVersion"] == "1.6" and sbom["bomFormat"] == "CycloneDX"
    assert data.endswith(b"}\n")
    # a function of record + inventory: same input, same bytes (timestamp and serial number included)
    assert sbom_json(build_sbom(BuildRecord.from_json(RECORD), INVENTORY, subject=SUBJECT)) == data
    assert sbom["metadata"]["timestamp"].startswith("2026-12-01T05:19:53")
    other = build_sbom(BuildRecord.from_json(RECORD), INVENTORY, subject=(REPOSITORY, "sha256:" + "0" * 64))
    assert other["serialNumber"] != sbom["serialNumber"]


def test_the_image_is_the_metadata_component(sbom: dict) -> None:
    image = sbom["metadata"]["component"]
    assert image["type"] == "container"
    assert image["name"] == REPOSITORY and image["version"] == DIGEST
    assert image["purl"].startswith("pkg:oci/e2e@sha256")
    assert f"repository_url={REPOSITORY}" in image["purl"] and DIGEST[7:] in image["purl"]
    assert [t["name"] for t in sbom["metadata"]["tools"]["components"]] == ["envbuild"]


def test_torch_carries_the_records_hash_index_and_layer(sbom: dict) -> None:
    torch = component(sbom, "python-package", "torch")
    assert torch["version"] == "2.13.0+cpu"
    assert torch["purl"] == "pkg:pypi/torch@2.13.0%2Bcpu"
    assert torch["hashes"] == [
        {"alg": "SHA-256", "content": "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"}
    ]
    props = {p["name"]: p["value"] for p in torch["properties"]}
    assert props[fields.P_PACKAGE_INDEX] == "wheelhouse"
    assert props[fields.P_PACKAGE_LAYER] == "framework"


def test_a_dist_in_the_image_but_not_in_the_record_is_listed_without_hash() -> None:
    record = copy.deepcopy(RECORD)
    record["dependencies"] = [d for d in record["dependencies"] if d["name"] != "sympy"]
    sympy = component(
        build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT), "python-package", "sympy"
    )
    assert sympy["version"] == "1.14.0" and "hashes" not in sympy
    assert [p["name"] for p in sympy["properties"]] == [fields.P_COMPONENT_ROLE]


def test_python3_from_dpkg_is_an_os_package_with_its_version(sbom: dict) -> None:
    python3 = component(sbom, "os-package", "python3")
    assert python3["version"] == "3.11.2-1+b1"
    assert python3["purl"] == "pkg:deb/debian/python3@3.11.2-1%2Bb1?arch=amd64&distro=debian-12"
    assert len([c for c in sbom["components"] if c.get("purl", "").startswith("pkg:deb/")]) == 118


def test_the_gpu_stack_components_carry_the_stacks_versions(sbom: dict) -> None:
    assert component(sbom, "cuda-runtime", "cuda-runtime")["version"] == "13.0"
    assert component(sbom, "cudnn", "cudnn")["version"] == "9.20.0.48"
    assert component(sbom, "nccl", "nccl")["version"] == "2.29.7"
    framework = component(sbom, "framework", "torch")
    assert framework["type"] == "framework" and framework["version"] == "2.13.0"
    base = component(sbom, "base-image", "envbuild-test/bookworm")
    assert base["type"] == "container" and base["purl"] == (
        "pkg:oci/bookworm?repository_url=envbuild-test/bookworm&tag=latest"
    )


def test_a_pinned_base_image_has_its_digest() -> None:
    record = copy.deepcopy(RECORD)
    record["base_image"] = "nvidia/cuda:13.0.0-runtime-ubuntu24.04@sha256:" + "a" * 64
    base = component(
        build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT), "base-image", "nvidia/cuda"
    )
    assert base["version"] == "sha256:" + "a" * 64
    assert base["hashes"] == [{"alg": "SHA-256", "content": "a" * 64}]
    assert "tag=13.0.0-runtime-ubuntu24.04" in base["purl"]


def test_the_image_level_properties(sbom: dict) -> None:
    expected = {
        fields.P_TARGET: "default",
        fields.P_PLATFORM: "linux/amd64",
        fields.P_SPEC_DIGEST: RECORD["spec"]["digest"],
        fields.P_MATRIX_DIGEST: "sha256:" + RECORD["stack"]["matrix_digest"],
        fields.P_IMAGE_DIGEST: DIGEST,
        fields.P_MIN_DRIVER: "580.65.06",
        fields.P_REQUIRE_CUDA: "cuda>=13.0",
        fields.P_GPU_ARCH: "7.5;8.0;8.6;9.0;10.0;12.0",
        fields.P_COMPAT: "native",
        fields.P_SMOKE_DEVICE: "cpu",
        fields.P_SMOKE_PASSED: "true",
        fields.P_SMOKE_GATES: "arguments,device,import,placement,precision,training",
        fields.P_SMOKE_REPORT_DIGEST: RECORD["report_digest"],
    }
    for name, value in expected.items():
        assert fields.sbom_property(sbom, name) == value, name
    assert fields.sbom_property(sbom, fields.P_LOCK_DIGEST) is None  # this build was not locked


def test_require_cuda_falls_back_to_the_images_env_and_a_local_build_is_its_image_id() -> None:
    record = copy.deepcopy(RECORD)
    record["nvidia_require_cuda"] = None
    record["lock_digest"] = "sha256:" + "b" * 64
    inventory = INVENTORY.replace(env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.8"})
    local = build_sbom(BuildRecord.from_json(record), inventory, subject=None)  # type: ignore[arg-type]
    validate_sbom(sbom_json(local))
    assert fields.sbom_property(local, fields.P_REQUIRE_CUDA) == "cuda>=12.8"
    assert fields.sbom_property(local, fields.P_LOCK_DIGEST) == "sha256:" + "b" * 64
    promoted = RECORD["images"]["promoted"]
    assert fields.sbom_property(local, fields.P_IMAGE_DIGEST) == promoted
    image = local["metadata"]["component"]
    assert image["name"] == RECORD["tags"][0] and image["version"] == promoted


def test_credentials_in_an_index_url_never_reach_the_sbom() -> None:
    record = copy.deepcopy(RECORD)
    for dep in record["dependencies"]:
        dep["index"] = "https://ci-bot:s3cr3t-pass@pypi.internal.example/simple"
    record["base_image"] = "https://ci-bot:s3cr3t-pass@registry.example/base:1"
    data = sbom_json(build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT))
    assert b"s3cr3t-pass" not in data and b"ci-bot" not in data
    torch = component(json.loads(data), "python-package", "torch")
    assert {"name": fields.P_PACKAGE_INDEX, "value": "https://***@pypi.internal.example/simple"} in torch[
        "properties"
    ]


def test_conda_packages_are_listed_with_their_purl_and_hash() -> None:
    package = CondaPackage(
        name="pytorch",
        version="2.9.1",
        build="cuda129_mkl_py312_h1234567_300",
        channel="conda-forge",
        subdir="linux-64",
        url=None,
        sha256="c" * 64,
    )
    inventory = Inventory(os_packages=(), python=(), conda=(package,), env={})
    sbom = build_sbom(BuildRecord.from_json(RECORD), inventory, subject=SUBJECT)
    validate_sbom(sbom_json(sbom))
    conda = component(sbom, "conda-package", "pytorch")
    assert conda["purl"] == (
        "pkg:conda/pytorch@2.9.1?build=cuda129_mkl_py312_h1234567_300&channel=conda-forge&subdir=linux-64"
    )
    assert conda["hashes"] == [{"alg": "SHA-256", "content": "c" * 64}]


def test_a_broken_sbom_fails_validation_naming_the_path(sbom: dict) -> None:
    broken = copy.deepcopy(sbom)
    index = next(i for i, c in enumerate(broken["components"]) if c["name"] == "python3")
    broken["components"][index]["type"] = "snake"
    with pytest.raises(EnvbuildError, match=rf"\$\.components\[{index}\]\.type") as caught:
        validate_sbom(sbom_json(broken))
    assert "snake" in caught.value.message and caught.value.fix
    with pytest.raises(EnvbuildError, match="not JSON"):
        validate_sbom(b"{not json")


def test_the_audit_gates_measured_kernels_and_verdicts_are_properties() -> None:
    """A GPU build's record carries what the audit gate read from the framework's libraries; the CPU
    record of the fixture has none, and the SBOM then says nothing rather than an empty list."""
    assert (
        fields.sbom_property(
            build_sbom(BuildRecord.from_json(RECORD), INVENTORY, subject=(REPOSITORY, DIGEST)),
            fields.P_AUDIT_SASS,
        )
        is None
    )
    record = copy.deepcopy(RECORD)
    record["audit"]["libraries"] = [
        {
            "path": "torch/lib/libtorch_cuda.so",
            "sass": ["sm_90", "sm_80"],
            "ptx": ["compute_90"],
            "counts": True,
        },
        {
            "path": "torch/lib/libnvrtc.so",
            "sass": ["sm_50"],
            "ptx": [],
            "counts": False,
        },  # not the framework's
    ]
    record["audit"]["gpus"] = {"sm_90": {"verdict": "native"}, "sm_89": {"verdict": "ptx-only"}}
    sbom = build_sbom(BuildRecord.from_json(record), INVENTORY, subject=(REPOSITORY, DIGEST))
    assert fields.sbom_property(sbom, fields.P_AUDIT_SASS) == "sm_80,sm_90"
    assert fields.sbom_property(sbom, fields.P_AUDIT_PTX) == "compute_90"
    assert fields.sbom_property(sbom, fields.P_AUDIT_VERDICTS) == "sm_89=ptx-only,sm_90=native"


def test_the_sbom_says_which_copy_loads_and_what_the_audit_found_twice() -> None:
    """issue 32 item 5: the stack's cuda_libraries (plan.plan) and the audit's duplicates."""
    record = copy.deepcopy(RECORD)
    assert (
        fields.sbom_property(
            build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT), fields.P_CUDA_LOADED_FROM
        )
        is None
    )
    record["stack"]["cuda_libraries"] = {
        "loaded_from": "framework-wheels",
        "path": "site-packages/nvidia/*/lib",
        "why": "...",
    }
    copies = [
        {"path": f"p{n}", "bytes": 10, "version": None, "version_from": None, "loaded": n == 0}
        for n in range(4)
    ]
    record["audit"] = {
        "libraries": [],
        "gpus": {},
        "duplicates": [
            {"library": "libnvperf_host", "component": "CUPTI", "copies": copies[:2], "wasted_bytes": 10},
            {"library": "libcupti", "component": "CUPTI", "copies": copies, "wasted_bytes": 30},
        ],
        "duplicate_bytes": 40,
    }
    sbom = build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT)
    assert fields.sbom_property(sbom, fields.P_CUDA_LOADED_FROM) == "framework-wheels"
    assert fields.sbom_property(sbom, fields.P_CUDA_LOADED_PATH) == "site-packages/nvidia/*/lib"
    assert fields.sbom_property(sbom, fields.P_AUDIT_DUPLICATES) == "libcupti=4,libnvperf_host=2"
    assert fields.sbom_property(sbom, fields.P_AUDIT_DUPLICATE_BYTES) == "40"
