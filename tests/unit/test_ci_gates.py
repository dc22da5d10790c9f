"""The generated CI jobs run the gates `envbuild build` runs (issue 32, item 7): for every target, the
audit gate for the GPUs it is built for, then the smoke step with the spec's [smoke] settings. Each
verify command of every golden workflow and pipeline is read back with envbuild's own argument parser
and compared with what build would use, worked out here from the spec and the matrix: a job that lost
its `--gpu`, or a smoke setting, fails these tests.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from envbuild.cli.parser import build_parser
from envbuild.matrix.model import Matrix
from envbuild.matrix.versions import sm_name
from envbuild.resolve.query import parse_gpu
from envbuild.scaleout.github import ACTIONS, workflow_yaml
from envbuild.scaleout.gitlab import pipeline_yaml
from envbuild.spec.model import load_spec
from tests.helpers.cicases import GITHUB_CASES, GITLAB_CASES
from tests.helpers.workflows import INSTALL, yaml_load

_IF_RE = re.compile(r"matrix\.target == '([^']*)' && matrix\.gpu == '([^']*)'")


def verify_args(script: str):
    """The `envbuild verify` line of a script, parsed as the CLI parses it."""
    (line,) = [line for line in script.splitlines() if line.startswith("envbuild verify ")]
    argv = shlex.split(line)[1:]
    return build_parser(argv)[0].parse_args(argv)


def expected_gpus(matrix: Matrix, spec, target: str, gpu: str) -> list[str]:
    """The GPUs a verify job for `target` on a `gpu` runner must audit: those of its capability (a CPU
    smoke step: every one of the target's)."""
    (found,) = spec.target(target)
    if gpu == "cpu":
        return list(found.stack.gpus)
    return [name for name in found.stack.gpus if sm_name(parse_gpu(name, matrix).cc) == gpu]


def expected_precision(matrix: Matrix, spec, gpus: list[str]) -> str:
    """The spec's [smoke] precision, or on a GPU job the next one down that every GPU of the job
    computes in (issue 34 item 7: bf16 -> fp16 -> fp32, from the GPU rows' bf16/fp16)."""
    precision = spec.smoke.precision
    if spec.smoke.device != "gpu":
        return precision
    rows = [parse_gpu(name, matrix) for name in gpus]
    if precision == "bf16" and not all(row.bf16 for row in rows):
        precision = "fp16"
    if precision == "fp16" and not all(row.fp16 for row in rows):
        precision = "fp32"
    return precision


def assert_build_gates(args, matrix: Matrix, spec, gpus: list[str], matrix_path: str | None) -> None:
    assert args.gpu == gpus  # the audit gate, for these GPUs
    smoke = spec.smoke
    assert (args.smoke_device, args.steps, args.precision, args.timeout) == (
        smoke.device,
        smoke.steps,
        expected_precision(matrix, spec, gpus),
        smoke.timeout,
    )
    assert args.matrix == matrix_path and args.report and args.image == "$IMAGE"


def github_verify(matrix: Matrix, spec, kwargs: dict) -> list[tuple[dict, dict]]:
    """(matrix entry, the one verify step it runs) for every entry of the workflow's verify job."""
    verify = yaml_load(workflow_yaml(matrix, spec, **{"install": INSTALL, **kwargs}))["jobs"]["verify"]
    steps = [step for step in verify["steps"] if "envbuild verify" in step.get("run", "")]
    pairs = []
    for entry in verify["strategy"]["matrix"]["include"]:
        runs = []
        for step in steps:
            if "if" not in step:
                runs.append(step)
                continue
            target, gpu = _IF_RE.fullmatch(step["if"]).groups()
            if (target, gpu) == (entry["target"], entry["gpu"]):
                runs.append(step)
        assert len(runs) == 1, (entry, [step["name"] for step in runs])  # never none, never two
        pairs.append((entry, runs[0]))
    return pairs


@pytest.mark.parametrize("name", GITHUB_CASES)
def test_every_github_verify_job_runs_the_audit_and_the_smoke_step_build_runs(
    matrix: Matrix, name: str
) -> None:
    spec_path, kwargs = GITHUB_CASES[name]
    spec = load_spec(str(spec_path))
    audited: dict[str, list[str]] = {}
    for entry, step in github_verify(matrix, spec, kwargs):
        gpus = expected_gpus(matrix, spec, entry["target"], entry["gpu"])
        assert_build_gates(verify_args(step["run"]), matrix, spec, gpus, kwargs.get("matrix_path"))
        audited.setdefault(entry["target"], []).extend(
            g for g in gpus if g not in audited.get(entry["target"], [])
        )
    # the jobs of a target together audit every GPU build's gate audits
    assert {t.name: sorted(t.stack.gpus) for t in spec.targets} == {k: sorted(v) for k, v in audited.items()}


@pytest.mark.parametrize("name", GITLAB_CASES)
def test_every_gitlab_verify_job_runs_the_audit_and_the_smoke_step_build_runs(
    matrix: Matrix, name: str
) -> None:
    spec_path, kwargs = GITLAB_CASES[name]
    spec = load_spec(str(spec_path))
    doc = yaml_load(pipeline_yaml(matrix, spec, **{"install": INSTALL, **kwargs}))
    jobs = {name: job for name, job in doc.items() if name.startswith("verify:")}
    assert jobs
    for job_name, job in jobs.items():
        _, target, gpu = job_name.split(":")
        args = verify_args("\n".join(job["script"]))
        gpus = expected_gpus(matrix, spec, target, gpu)
        assert_build_gates(args, matrix, spec, gpus, kwargs.get("matrix_path"))
        assert args.report == f"verify/{gpu}/smoke.json"


SETTINGS_SPEC = """
[stack]
driver = "550"
framework = "torch"
gpus = ["H100", "H200", "L4"]

[image]
repository = "registry.example/acme/train"

[smoke]
device = "gpu"
steps = 13
precision = "fp16"
timeout = 77
"""


def test_the_spec_s_own_smoke_settings_and_gpus_reach_both_generators(matrix: Matrix, tmp_path: Path) -> None:
    path = tmp_path / "envbuild.toml"
    path.write_text(SETTINGS_SPEC)
    spec = load_spec(str(path))
    commands = [verify_args(step["run"]) for _, step in github_verify(matrix, spec, {})]
    doc = yaml_load(pipeline_yaml(matrix, spec, install=INSTALL))
    commands += [
        verify_args("\n".join(job["script"])) for name, job in doc.items() if name.startswith("verify:")
    ]
    assert len(commands) == 4  # two capabilities, two generators
    for args in commands:
        assert (args.smoke_device, args.steps, args.precision, args.timeout) == ("gpu", 13, "fp16", 77)
    # H100 and H200 share sm_90: one job audits both
    assert sorted(tuple(args.gpu) for args in commands) == [
        ("H100", "H200"),
        ("H100", "H200"),
        ("L4",),
        ("L4",),
    ]


def test_github_verify_and_promote_jobs_check_the_repository_out(matrix: Matrix) -> None:
    """verify reads the checkout's --matrix (its --gpu names) and may install envbuild from a wheel in
    the repository; promote's attach step takes the locked hashes from the spec's envbuild.lock (without
    the checkout its SBOM said "built unlocked"). Both check out first, with or without --matrix."""
    checkout = ACTIONS["checkout"].split("@")[0] + "@"
    for name in ("sealed-pinned", "torch"):
        spec_path, kwargs = GITHUB_CASES[name]
        text = workflow_yaml(matrix, load_spec(str(spec_path)), **{"install": INSTALL, **kwargs})
        jobs = yaml_load(text)["jobs"]
        for job in ("verify", "promote"):
            assert jobs[job]["steps"][0]["uses"].startswith(checkout), (name, job)


SKIP_SPEC = (
    SETTINGS_SPEC
    + """
[audit]
skip = [{library = "libtorch_cuda.so", reason = "cuobjdump 13.5 stops on it; it's 'fine', see #12"}]
"""
)


def test_the_spec_s_audit_skips_reach_every_generated_audit(matrix: Matrix, tmp_path: Path) -> None:
    """A local build honours [audit] skip, so the CI audit must too: else CI fails an image envbuild
    build promotes. The reason comes back through both quoting layers as the spec wrote it."""
    path = tmp_path / "envbuild.toml"
    path.write_text(SKIP_SPEC)
    spec = load_spec(str(path))
    commands = [verify_args(step["run"]) for _, step in github_verify(matrix, spec, {})]
    doc = yaml_load(pipeline_yaml(matrix, spec, install=INSTALL))
    commands += [
        verify_args("\n".join(job["script"])) for name, job in doc.items() if name.startswith("verify:")
    ]
    assert len(commands) == 4
    for args in commands:
        assert args.skip_audit == ["libtorch_cuda.so=cuobjdump 13.5 stops on it; it's 'fine', see #12"]


def test_a_skip_reason_github_would_evaluate_is_refused(matrix: Matrix, tmp_path: Path) -> None:
    from envbuild.errors import UsageError

    path = tmp_path / "envbuild.toml"
    path.write_text(SKIP_SPEC.replace("see #12", "see ${{ secrets.TOKEN }}"))
    with pytest.raises(UsageError) as raised:
        workflow_yaml(matrix, load_spec(str(path)), install=INSTALL)
    assert "[audit] skip for libtorch_cuda.so" in raised.value.message and "${{" in raised.value.message
