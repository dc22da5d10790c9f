"""`envbuild ci k8s` (issue 22, part 3): one Kubernetes Job per build and GPU type, validated with
kubernetes-validate (strict: unknown fields fail) against the Kubernetes version envbuild states
(K8S_VERSION, docs/ci.md), byte for byte against a golden file (UPDATE_GOLDEN=1 rewrites it), and
every value from the command line checked before it reaches a manifest."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.model import Matrix
from envbuild.scaleout.k8s import K8S_VERSION, gpu_node_terms, jobs, to_yaml
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN
from tests.helpers.slurm import shellcheck
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
    assert container["command"][:2] == ["/bin/sh", "-c"]  # the guard, then `exec "$@"`: container_command
    assert container["args"] == [
        "python", "/opt/envbuild/smoke.py", "--device", "gpu", "--steps", str(spec.smoke.steps),
        "--precision", spec.smoke.precision,
    ]  # fmt: skip
    assert "ENVBUILD_PREFLIGHT" not in {e["name"] for e in container["env"]}  # a GPU Job: strict
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"]  # gpu_node_terms, tested below
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
        assert container["args"][2:4] == ["--device", "cpu"]
        # no affinity on the GPU labels, and the guard only warns (preflight.smoke_environment)
        assert "affinity" not in job.document["spec"]["template"]["spec"]
        assert {"name": "ENVBUILD_PREFLIGHT", "value": "warn"} in container["env"]
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


# --- node affinity on GPU Feature Discovery's labels (issue 36, item 5) ---------------------------

DRIVER = {"key": "nvidia.com/cuda.driver.major", "operator": "Gt", "values": ["579"]}


def major_in(major: int) -> dict:
    return {"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": [str(major)]}


def minor_gt(minor: int) -> dict:
    return {"key": "nvidia.com/gpu.compute.minor", "operator": "Gt", "values": [str(minor)]}


def major_gt(major: int) -> dict:
    return {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": [str(major)]}


@pytest.mark.parametrize(
    ("arch", "native", "expected"),
    [
        # SASS only: one term per major, a minor bound only where the lowest minor is above 0
        ("7.5;8.0;8.6;9.0", True, [[major_in(7), minor_gt(4)], [major_in(8)], [major_in(9)]]),
        # same-major minors: the lowest one counts (8.0's cubin runs on 8.6 and 8.9)
        ("8.6;8.9;8.0", True, [[major_in(8)]]),
        ("8.6;8.9", True, [[major_in(8), minor_gt(5)]]),
        # PTX under native compat: every major above it, and its own major from its minor
        ("8.0;9.0+PTX", True, [[major_in(8)], [major_in(9)], [major_gt(9)]]),
        ("8.6+PTX", True, [[major_in(8), minor_gt(5)], [major_gt(8)]]),
        # the lowest PTX covers the majors above it: 10.0 and 12.0 need no term of their own
        ("7.0;8.0+PTX;10.0;12.0;12.0+PTX", True, [[major_in(7)], [major_in(8)], [major_gt(8)]]),
        # a SASS minor below the PTX one keeps its lower bound, a PTX minor below the SASS one wins
        ("9.0;compute_93", True, [[major_in(9)], [major_gt(9)]]),
        ("9.4;compute_92", True, [[major_in(9), minor_gt(1)], [major_gt(9)]]),
        # PTX does not count under minor-version compatibility: SASS alone
        ("8.0;9.0+PTX", False, [[major_in(8)], [major_in(9)]]),
        ("7.5;compute_80", False, [[major_in(7), minor_gt(4)]]),
    ],
)
def test_gpu_node_terms_write_the_coverage_rule_as_label_ranges(
    arch: str, native: bool, expected: list[list[dict]]
) -> None:
    terms = gpu_node_terms(parse_arch_list(arch), native=native, min_driver=(580, 65, 6), where="x")
    assert terms == [{"matchExpressions": [DRIVER, *exprs]} for exprs in expected]


def matches(term: dict, labels: dict[str, int]) -> bool:
    """Kubernetes' reading of one nodeSelectorTerm (In, Gt on integer label values) for a node."""
    for expression in term["matchExpressions"]:
        value = labels[expression["key"]]
        if expression["operator"] == "In" and str(value) not in expression["values"]:
            return False
        if expression["operator"] == "Gt" and not value > int(expression["values"][0]):
            return False
    return True


@pytest.mark.parametrize(
    "arch", ["3.7;5.0;8.6;9.0", "5.0;8.0+PTX;8.9;12.0", "compute_75;8.6", "6.1;6.0;7.2+PTX"]
)
@pytest.mark.parametrize("native", [True, False])
def test_a_node_matches_the_terms_exactly_when_the_guard_would_let_the_image_run(
    arch: str, native: bool
) -> None:
    """Every compute capability from 1.0 to 15.9 and drivers either side of the floor's major: the
    scheduler's answer is ArchList.covers (the guard's rule) and the driver major, nothing more or less."""
    built = parse_arch_list(arch)
    try:
        terms = gpu_node_terms(built, native=native, min_driver=(550, 54, 14), where="x")
    except UsageError:  # nothing this stack can run (PTX only, minor compat): tested below
        assert not native and not built.sass
        return
    # sorted: the majors' In terms in order, the PTX Gt term last
    order = [
        (t["matchExpressions"][1]["operator"] == "Gt", int(t["matchExpressions"][1]["values"][0]))
        for t in terms
    ]
    assert order == sorted(order) and len(set(order)) == len(order)
    for driver in (549, 550, 551):
        for major in range(1, 16):
            for minor in range(10):
                labels = {
                    "nvidia.com/cuda.driver.major": driver,
                    "nvidia.com/gpu.compute.major": major,
                    "nvidia.com/gpu.compute.minor": minor,
                }
                runs = driver >= 550 and built.covers((major, minor), allow_ptx=native) is not None
                assert any(matches(t, labels) for t in terms) == runs, (driver, major, minor)


def test_a_build_no_gpu_node_can_run_is_refused_with_a_fix() -> None:
    with pytest.raises(UsageError) as raised:
        gpu_node_terms(
            parse_arch_list("compute_80"), native=False, min_driver=(550,), where="spec target 'x'"
        )
    assert "spec target 'x'" in raised.value.message and raised.value.fix


def test_a_ptx_build_gets_the_terms_of_its_arch_list_in_its_job(matrix: Matrix) -> None:
    """The Jobs of the jax spec (5.0 ... 12.0+PTX, native): one term per SASS major up to 12, then
    `compute.major Gt 12` for the PTX; every term with the driver floor's major."""
    (job, *_) = spec_jobs(matrix, "platforms")
    pod = job.document["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    driver = {"key": "nvidia.com/cuda.driver.major", "operator": "Gt", "values": ["569"]}  # 570.26 floor
    assert terms == [
        *({"matchExpressions": [driver, major_in(m)]} for m in (5, 6, 7, 8, 9, 10, 12)),
        {"matchExpressions": [driver, major_gt(12)]},
    ]


# --- the guard before the smoke step, in the pod's log --------------------------------------------

FAKE_PYTHON = """#!/bin/sh
if [ "$1" = -m ] && [ "$2" = envbuild_preflight ]; then
  echo "envbuild preflight: ok: driver 580.65.06 (needs 520.61.05)"
  exit "${GUARD_STATUS:-0}"
fi
echo "smoke $*"
echo '{"passed": true}'
"""


@pytest.mark.parametrize(
    ("guard_status", "exit_code", "smoke_ran", "said"),
    [
        (0, 0, True, ""),
        (78, 78, False, "refused this node (exit 78); the smoke step did not run"),
        (1, 0, True, "no preflight verdict (python -m envbuild_preflight exited 1); running the smoke step"),
    ],
    ids=["ok", "stop", "no-guard"],
)
def test_the_container_runs_the_guard_then_the_smoke_program_whose_report_ends_the_log(
    matrix: Matrix, tmp_path: Path, guard_status: int, exit_code: int, smoke_ran: bool, said: str
) -> None:
    """The Job's real command and args under /bin/sh, with a stand-in `python` on PATH: the guard's
    line first, then the smoke program by exec (its report the last stdout line, its status the pod's);
    the guard's stop ends it with 78 and the smoke program never starts."""
    (job, *_) = spec_jobs(matrix, "torch")
    (container,) = job.document["spec"]["template"]["spec"]["containers"]
    (tmp_path / "python").write_text(FAKE_PYTHON)
    (tmp_path / "python").chmod(0o755)
    done = subprocess.run(
        [*container["command"], *container["args"]],
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "GUARD_STATUS": str(guard_status)},
    )
    assert done.returncode == exit_code, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "envbuild preflight: ok: driver 580.65.06 (needs 520.61.05)"
    if smoke_ran:
        assert lines[1:] == ["smoke " + " ".join(container["args"][1:]), '{"passed": true}']
    else:
        assert lines[1:] == []
    assert said in done.stderr and (said or done.stderr == "")


def test_the_container_script_is_shellcheck_clean(matrix: Matrix, tmp_path: Path) -> None:
    (job, *_) = spec_jobs(matrix, "torch")
    script = job.document["spec"]["template"]["spec"]["containers"][0]["command"][2]
    path = tmp_path / "command.sh"
    path.write_text("#!/bin/sh\n" + script + "\n")
    checked = shellcheck(path)
    assert checked.returncode == 0, checked.stdout
