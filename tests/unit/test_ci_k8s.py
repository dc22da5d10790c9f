"""`envbuild ci k8s` (issue 22, part 3): one Kubernetes Job per build and GPU type, validated with
kubernetes-validate (strict: unknown fields fail) against the Kubernetes version envbuild states
(K8S_VERSION, docs/ci.md), byte for byte against a golden file (UPDATE_GOLDEN=1 rewrites it), and
every value from the command line checked before it reaches a manifest."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from envbuild.scaleout.k8s import K8S_VERSION, jobs, to_yaml
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH

DIGEST = "sha256:" + "ab" * 32
H100 = "NVIDIA-H100-80GB-HBM3"
SPECS = {  # name -> (spec, options)
    "torch": (TORCH, {"gpu_types": [H100, "NVIDIA-L4"], "images": [f"default=ghcr.io/acme/train@{DIGEST}"]}),
    "two": (GOLDEN / "ci" / "two.toml", {"runtime_class": "nvidia", "namespace": "gpu-ci"}),
    "cpu": (GOLDEN / "ci" / "cpu.toml", {"pull_secret": "regcred"}),
    "platforms": (
        GOLDEN / "ci" / "platforms.toml",
        {"node_selectors": ["cloud.google.com/gke-nodepool=gpu"]},
    ),
}


def spec_jobs(matrix: Matrix, name: str):
    path, options = SPECS[name]
    return jobs(matrix, load_spec(str(path)), **options)


def read_jobs(directory: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(directory.glob("*.yaml"))}


@pytest.mark.parametrize("name", SPECS)
def test_every_job_validates_strictly_against_the_stated_kubernetes_version(
    matrix: Matrix, name: str
) -> None:
    made = spec_jobs(matrix, name)
    assert made
    for job in made:
        document = yaml.safe_load(to_yaml(job.document))
        assert document == job.document  # the YAML reads back as the document it was made from
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("where", "broken"),
    [
        # the GPU limit one level too high: `resources` takes limits/requests, not a resource name
        (("containers", 0, "resources"), {"nvidia.com/gpu": "1"}),
        # a field Kubernetes does not have
        (("containers", 0, "securityContext", "readOnlyRootFS"), True),
        # a string where a boolean goes
        (("automountServiceAccountToken",), "no"),
    ],
)
def test_a_broken_job_fails_validation(matrix: Matrix, where: tuple, broken: object) -> None:
    (job, *_) = spec_jobs(matrix, "torch")
    document = yaml.safe_load(to_yaml(job.document))
    kubernetes_validate.validate(document, K8S_VERSION, strict=True)  # whole, it validates
    node = document["spec"]["template"]["spec"]
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = broken
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_golden_job_file(matrix: Matrix, tmp_path: Path, capsys) -> None:
    args = ["ci", "k8s", "-f", str(TORCH), "-o", str(tmp_path / "k8s"), "--gpu-type", H100]
    args += ["--image", f"default=ghcr.io/acme/train@{DIGEST}", "--runtime-class", "nvidia"]
    args += ["--namespace", "gpu-ci", "--image-pull-secret", "regcred"]
    assert main(args) == 0
    name = "envbuild-verify-default-nvidia-h100-80gb-hbm3.yaml"
    assert f"wrote {tmp_path / 'k8s' / name}" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "k8s").iterdir()] == [name]
    text = (tmp_path / "k8s" / name).read_text()
    golden = GOLDEN / "k8s" / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"k8s/{name} (UPDATE_GOLDEN=1)"


def test_a_gpu_job_asks_for_one_gpu_of_its_type_as_the_images_user_with_least_privilege(
    matrix: Matrix,
) -> None:
    spec = load_spec(str(TORCH))
    made = spec_jobs(matrix, "torch")
    assert [(j.name, j.gpu_type) for j in made] == [
        ("envbuild-verify-default-nvidia-h100-80gb-hbm3", H100),
        ("envbuild-verify-default-nvidia-l4", "NVIDIA-L4"),
    ]
    job = made[0].document
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == spec.smoke.timeout + 1800
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": H100}
    (container,) = pod["containers"]
    assert container["image"] == f"ghcr.io/acme/train@{DIGEST}"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert [*container["command"], *container["args"]] == [
        "python", "/opt/envbuild/smoke.py", "--device", "gpu", "--steps", str(spec.smoke.steps),
        "--precision", spec.smoke.precision,
    ]  # fmt: skip
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001  # render's USER
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]


def test_a_cpu_smoke_spec_asks_for_no_gpu_and_refuses_a_gpu_type(
    matrix: Matrix, tmp_path: Path, capsys
) -> None:
    made = spec_jobs(matrix, "cpu")
    assert [j.name for j in made] == ["envbuild-verify-hopper", "envbuild-verify-ada-l4"]
    for job in made:
        (container,) = job.document["spec"]["template"]["spec"]["containers"]
        assert "resources" not in container
        assert container["args"][:2] == ["--device", "cpu"]
        # no digest given: a placeholder no registry serves, never a tag that could be another image
        assert container["image"] == "registry.local:5000/acme/train@sha256:DIGEST"
    code = main(["ci", "k8s", "-f", str(GOLDEN / "ci" / "cpu.toml"), "-o", str(tmp_path), "--gpu-type", H100])
    assert code == 2 and "--gpu-type" in capsys.readouterr().err


def test_each_platform_of_a_target_gets_its_own_job_on_nodes_of_that_architecture(matrix: Matrix) -> None:
    made = spec_jobs(matrix, "platforms")
    selectors = {j.name: j.document["spec"]["template"]["spec"]["nodeSelector"] for j in made}
    assert selectors == {
        "envbuild-verify-both-amd64": {"kubernetes.io/arch": "amd64", "cloud.google.com/gke-nodepool": "gpu"},
        "envbuild-verify-both-arm64": {"kubernetes.io/arch": "arm64", "cloud.google.com/gke-nodepool": "gpu"},
        "envbuild-verify-x86": {"kubernetes.io/arch": "amd64", "cloud.google.com/gke-nodepool": "gpu"},
    }


def test_a_long_gpu_type_still_makes_an_rfc1123_job_name(matrix: Matrix) -> None:
    long_type = "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-with-a-very-long-product-name-x"[:63]
    (job,) = jobs(matrix, load_spec(str(TORCH)), gpu_types=[long_type])
    assert len(job.name) <= 63 and job.name.startswith("envbuild-verify-default-nvidia-a100")
    kubernetes_validate.validate(yaml.safe_load(to_yaml(job.document)), K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--gpu-type", "H100\nmalicious: true"),
        ("--gpu-type", "NVIDIA H100"),
        ("--node-selector", "pool=gpu\n  hostNetwork: true"),
        ("--node-selector", "no-value-sign"),
        ("--node-selector", "Bad_Prefix.io/x=y"),
        ("--runtime-class", "nvidia; rm -rf /"),
        ("--namespace", "GPU_CI"),
        ("--namespace", "a" * 64),
        ("--image-pull-secret", "$(curl evil)"),
        ("--image", "default=ghcr.io/acme/train:latest"),
        ("--image", "default=ghcr.io/acme/train@sha256:abc"),
        ("--image", f"default=ghcr.io/acme/train@{DIGEST}\n"),
        ("--image", f"other=ghcr.io/acme/train@{DIGEST}"),
        ("--image", f"default=Ghcr.io/ACME/train@{DIGEST}"),
    ],
)
def test_an_invalid_or_injected_value_is_refused_naming_its_flag(
    tmp_path: Path, capsys, flag: str, value: str
) -> None:
    out = tmp_path / "k8s"
    assert main(["ci", "k8s", "-f", str(TORCH), "-o", str(out), flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err
    assert not out.exists()  # nothing written
