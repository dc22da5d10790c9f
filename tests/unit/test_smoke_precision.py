"""What each GPU can do (issue 34 item 7): a target whose [smoke] precision one of its GPUs lacks.

resolve and render warn, naming the GPU, its capability, the precision and what its verify job uses
instead; every generated verify job (GitHub, GitLab, Slurm, Kubernetes) passes the precision its GPU
has to the smoke step. The rule is the smoke program's own (smoke_common.effective_precision); the
expected answers below are worked out by hand from NVIDIA's table (bf16 from 8.0; fp16 from 5.3, not on
5.2 Maxwell: see matrix/gpufeatures.py), not from the rule.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.cli.parser import build_parser
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from envbuild.resolve.precision import precision_warnings
from envbuild.resolve.query import parse_gpu
from envbuild.scaleout.ciplan import ci_plan, verify_command
from envbuild.scaleout.github import workflow_yaml
from envbuild.scaleout.gitlab import pipeline_yaml
from envbuild.scaleout.k8s import jobs as k8s_jobs
from envbuild.scaleout.slurm import slurm_scripts
from envbuild.smoke import effective_precision
from envbuild.spec.model import load_spec
from tests.helpers.minimatrix import write_minimatrix
from tests.helpers.workflows import INSTALL

SPEC = """[stack]
driver = "550"
framework = "torch"
gpus = [{gpus}]
strategy = "wheels"
os = "ubuntu22.04"

[smoke]
precision = "{precision}"
{device}
[image]
repository = "registry.example/team/torch"
"""


def write_spec(tmp_path: Path, gpus: list[str], precision: str = "bf16", device: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    listed = ", ".join(json.dumps(g) for g in gpus)
    path.write_text(SPEC.format(gpus=listed, precision=precision, device=device))
    return path


# --- the rule, on paper


@pytest.mark.parametrize(
    ("precision", "bf16", "fp16", "expected"),
    [
        ("bf16", True, True, "bf16"),  # A100, H100
        ("bf16", False, True, "fp16"),  # P100, V100, T4: the other 16-bit format
        ("bf16", False, False, "fp32"),  # Maxwell 5.2, Kepler
        ("fp16", False, True, "fp16"),
        ("fp16", False, False, "fp32"),
        ("fp32", False, False, "fp32"),
    ],
)
def test_the_rule_on_a_gpu(precision: str, bf16: bool, fp16: bool, expected: str) -> None:
    assert effective_precision(precision, on_gpu=True, bf16=bf16, fp16=fp16) == expected


def test_the_rule_on_the_cpu_is_the_programs_own() -> None:
    """fp16 on the CPU becomes bf16 (unless ENVBUILD_SMOKE_CPU_FP16), whatever the GPU facts say."""
    assert effective_precision("fp16", on_gpu=False) == "bf16"
    assert effective_precision("fp16", on_gpu=False, cpu_fp16=True) == "fp16"
    assert effective_precision("bf16", on_gpu=False, bf16=False) == "bf16"


# --- resolve -f and render


def test_resolve_warns_of_bf16_on_a_p100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ["Tesla P100"])
    assert main(["resolve", "-f", str(spec)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: ")
    assert (
        '[smoke] precision = "bf16", but Tesla P100 (compute capability 6.0) has no bf16: '
        "its verify job runs the smoke step in fp16 instead" in err
    )
    assert 'fix: set precision = "fp16" in [smoke]' in err
    assert main(["resolve", "-f", str(spec), "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # the document carries it
    (warning,) = json.loads(captured.out)["targets"][0]["warnings"]
    assert {k: warning[k] for k in ("gpu", "compute_capability", "precision", "verify_precision")} == {
        "gpu": "Tesla P100",
        "compute_capability": "6.0",
        "precision": "bf16",
        "verify_precision": "fp16",
    }


def test_no_warning_on_an_a100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ["A100"])
    assert main(["resolve", "-f", str(spec)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["resolve", "-f", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["targets"][0]["warnings"] == []
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_render_warns_as_resolve_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ["A100", "Tesla V100"])
    assert main(["resolve", "-f", str(spec)]) == 0
    resolve_err = capsys.readouterr().err
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    render_err = capsys.readouterr().err
    assert render_err == resolve_err
    assert render_err.count("warning: ") == 1  # V100 alone; the A100 has bf16
    assert "Tesla V100 (compute capability 7.0) has no bf16" in render_err
    assert "or take Tesla V100 out of gpus" in render_err


def test_a_cpu_smoke_step_draws_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ["Tesla P100"], device='device = "cpu"\n')
    assert main(["resolve", "-f", str(spec)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_fp16_on_a_maxwell_falls_back_to_fp32(tmp_path: Path) -> None:
    """A 5.2 GPU has no fp16 arithmetic: the minimatrix gains a Maxwell row without stating it."""
    root = write_minimatrix(tmp_path / "mini")
    gpus = root / "gpus.toml"
    gpus.write_text(
        gpus.read_text()
        + '\n[[gpu]]\nname = "Tesla M60"\naliases = []\ncompute_capability = "5.2"\n'
        + 'architecture = "Maxwell"\nsegment = "data-center"\nfirst_cuda = "11.8"\ndata_center = true\n'
        + 'source = "https://example.org/primary"\n'
    )
    mini = load_matrix(root)
    spec = load_spec(str(write_spec(tmp_path, ["L4"], precision="fp16")))
    (warning,) = precision_warnings(spec.smoke, [parse_gpu("M60", mini), parse_gpu("L4", mini)], "here")
    assert (warning.gpu, warning.cc, warning.verify_precision) == ("Tesla M60", (5, 2), "fp32")
    assert "Tesla M60 (compute capability 5.2) has no fp16" in warning.message


# --- the verify jobs


def job_precisions(matrix: Matrix, spec_path: Path) -> dict[str, str]:
    spec = load_spec(str(spec_path))
    plan = ci_plan(matrix, spec, install=INSTALL)
    found = {}
    for job in plan.verify_jobs:
        line = verify_command(plan, job, "smoke.json")
        argv = shlex.split(line.replace('"$IMAGE"', "IMAGE"))[1:]
        args = build_parser(argv)[0].parse_args(argv)
        assert args.precision == job.precision
        found[job.gpu] = args.precision
    return found


def test_a_mixed_target_falls_back_on_the_v100_job_alone(matrix: Matrix, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, ["A100", "Tesla V100"])
    assert job_precisions(matrix, spec) == {"sm_80": "bf16", "sm_70": "fp16"}


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [("Tesla P100", "fp16"), ("Tesla V100", "fp16"), ("T4", "fp16"), ("A100", "bf16"), ("H100", "bf16")],
)
def test_the_verify_job_per_gpu(matrix: Matrix, tmp_path: Path, gpu: str, expected: str) -> None:
    (precision,) = job_precisions(matrix, write_spec(tmp_path, [gpu])).values()
    assert precision == expected


def test_a_capability_stand_in_follows_its_gpus(matrix: Matrix, tmp_path: Path) -> None:
    found = job_precisions(matrix, write_spec(tmp_path, ["sm_60", "8.0"]))
    assert found == {"sm_60": "fp16", "sm_80": "bf16"}


def test_a_cpu_job_passes_the_spec_precision(matrix: Matrix, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, ["Tesla P100"], device='device = "cpu"\n')
    assert job_precisions(matrix, spec) == {"cpu": "bf16"}


def test_github_and_gitlab_pass_each_jobs_precision(matrix: Matrix, tmp_path: Path) -> None:
    spec = load_spec(str(write_spec(tmp_path, ["A100", "Tesla V100"])))
    for text in (workflow_yaml(matrix, spec, install=INSTALL), pipeline_yaml(matrix, spec, install=INSTALL)):
        verify = [line for line in text.splitlines() if "envbuild verify " in line]
        v100 = [line for line in verify if "--gpu 'Tesla V100'" in line]
        a100 = [line for line in verify if "--gpu A100" in line]
        assert v100 and a100
        assert all("--precision fp16" in line for line in v100)
        assert all("--precision bf16" in line for line in a100)


def test_slurm_passes_a_precision_every_gpu_of_the_target_has(matrix: Matrix, tmp_path: Path) -> None:
    """A partition's node may hold any GPU of the target: the job smokes in what all of them have."""
    spec = load_spec(str(write_spec(tmp_path, ["A100", "Tesla V100"])))
    files = slurm_scripts(matrix, spec, shared_dir="/shared/eb", runtime="enroot")
    (verify,) = [text for name, text in files.items() if name.startswith("verify-") and "pyxis" not in name]
    (pyxis,) = [text for name, text in files.items() if "pyxis" in name]
    assert "--precision fp16" in verify and "bf16" not in verify
    assert "--precision fp16" in pyxis and "bf16" not in pyxis
    alone = load_spec(str(write_spec(tmp_path, ["A100"])))
    files = slurm_scripts(matrix, alone, shared_dir="/shared/eb")
    (verify,) = [text for name, text in files.items() if name.startswith("verify-")]
    assert "--precision bf16" in verify


def test_k8s_passes_the_gpu_products_precision(matrix: Matrix, tmp_path: Path) -> None:
    spec = load_spec(str(write_spec(tmp_path, ["A100", "Tesla V100"])))
    made = k8s_jobs(matrix, spec, gpu_types=["NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-16GB", "unknown-x"])

    def precision(job) -> str:
        args = job.document["spec"]["template"]["spec"]["containers"][0]["args"]
        return args[args.index("--precision") + 1]

    assert [precision(job) for job in made] == ["bf16", "fp16", "fp16"]  # an unknown product: any GPU
    (untyped,) = k8s_jobs(matrix, spec)
    assert precision(untyped) == "fp16"
