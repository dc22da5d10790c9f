"""The batch scripts `envbuild ci slurm` writes (issue 22, part B): one verify job per target and
partition with its #SBATCH lines and the spec's smoke settings, a promote job with the final tags,
submit.sh wiring promote behind every verify job, shell quoting and refusals, and the real shellcheck
over every script. The real cluster runs them in tests/engine/test_slurm_e2e.py.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from envbuild.scaleout.slurm import slurm_scripts
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN
from tests.helpers.slurm import envbuild_commands, logical_lines, sbatch_options, shellcheck
from tests.helpers.specs import TORCH_EXAMPLE

TWO = GOLDEN / "ci" / "two.toml"  # GPU smoke; targets "hopper" and "ada.l4", ghcr.io/acme/train
CPU = GOLDEN / "ci" / "cpu.toml"  # CPU smoke; registry.local:5000/acme/train
DIGEST = "sha256:" + "ab" * 32


def scripts(matrix: Matrix, spec: Path, **options) -> dict[str, str]:
    return slurm_scripts(matrix, load_spec(str(spec)), **{"shared_dir": "/shared/eb", **options})


def written(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "slurm"
    assert main(["ci", "slurm", *args, "-o", str(out)]) == 0
    return out


def test_one_verify_job_per_target_and_partition_with_its_sbatch_lines(matrix: Matrix) -> None:
    files = scripts(
        matrix, TWO, runtime="charliecloud", partitions=["h100", "l4"], gres="gpu:h100:2", account="proj-1"
    )
    verify = sorted(name for name in files if name.startswith("verify-"))
    assert verify == [
        "verify-ada-l4-h100.sh",
        "verify-ada-l4-l4.sh",
        "verify-hopper-h100.sh",
        "verify-hopper-l4.sh",
    ]
    sif = ["build-sif-ada-l4.sh", "build-sif-hopper.sh"]  # one per target, not per partition
    assert set(files) == {*verify, *sif, "promote.sh", "submit.sh", "README.md"}
    assert ("--partition", "h100") in sbatch_options(files["build-sif-hopper.sh"])  # the first one
    assert sbatch_options(files["verify-ada-l4-l4.sh"]) == [
        ("--job-name", "envbuild-verify-ada-l4-l4"),
        ("--time", "01:00:00"),
        ("--account", "proj-1"),
        ("--partition", "l4"),
        ("--gres", "gpu:h100:2"),
        ("--nodes", "1"),
        ("--ntasks", "1"),
        ("--output", "/shared/eb/ada-l4/l4/verify-%j.out"),
        ("--error", "/shared/eb/ada-l4/l4/verify-%j.out"),
    ]
    assert files["verify-hopper-h100.sh"].startswith("#!/usr/bin/env bash\n#SBATCH ")
    assert "\nset -euo pipefail\n" in files["verify-hopper-h100.sh"]


def test_the_verify_job_runs_envbuild_verify_with_the_specs_smoke_settings(matrix: Matrix) -> None:
    spec = load_spec(str(TWO))
    files = scripts(matrix, TWO, runtime="enroot", partitions=["h100"])
    text = files["verify-hopper-h100.sh"]
    assert envbuild_commands(text) == [
        [
            "verify",
            "$candidate",
            "--runtime",
            "enroot",
            "--smoke-device",
            "gpu",
            "--steps",
            str(spec.smoke.steps),
            "--precision",
            spec.smoke.precision,
            "--timeout",
            str(spec.smoke.timeout),
            "--report",
            "$out/report.json",
            "--record",
            "$out/record.json",
        ]
    ]
    assert "out=/shared/eb/hopper/h100" in logical_lines(text)
    assert "repository=ghcr.io/acme/train" in logical_lines(text)
    assert sbatch_options(text)[3] == ("--gres", "gpu:1")  # the default


def test_a_cpu_smoke_spec_asks_for_no_gpu_and_refuses_gres(matrix: Matrix, tmp_path: Path, capsys) -> None:
    files = scripts(matrix, CPU)
    options = dict(sbatch_options(files["verify-hopper-any.sh"]))
    assert "--gres" not in options and "--gpus" not in options and "--partition" not in options
    assert envbuild_commands(files["verify-hopper-any.sh"])[0][4:6] == ["--smoke-device", "cpu"]
    code = main(["ci", "slurm", "-f", str(CPU), "--gres", "gpu:1", "-o", str(tmp_path / "out")])
    assert code == 2 and "--gres" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_promote_runs_after_verify_with_each_targets_final_tags(matrix: Matrix) -> None:
    from envbuild.scaleout.ciplan import ci_plan

    spec = load_spec(str(TWO))
    files = scripts(matrix, TWO, partitions=["h100", "l4"])
    promotions = dict(ci_plan(matrix, spec, install="envbuild").promotions)
    commands = envbuild_commands(files["promote.sh"])
    to = {name: [w for tag in tags for w in ("--to", tag)] for name, tags in promotions.items()}
    assert commands == [
        ["promote", "$candidate_1", *to["hopper"], "--report", "/shared/eb/hopper/h100/report.json"],
        ["promote", "$candidate_2", *to["ada.l4"], "--report", "/shared/eb/ada-l4/h100/report.json"],
    ]
    assert dict(sbatch_options(files["promote.sh"]))["--output"] == "/shared/eb/promote-%j.out"
    assert "--gres" not in dict(sbatch_options(files["promote.sh"]))


def test_submit_sbatches_every_verify_job_then_promote_depending_on_all(matrix: Matrix) -> None:
    text = scripts(matrix, TWO, partitions=["h100", "l4"])["submit.sh"]
    lines = logical_lines(text)
    submitted = [
        shlex.split(line.split("$(submit ", 1)[1].rstrip(")")) for line in lines if "$(submit " in line
    ]
    # each verify job's script (its pyxis variant with submit.sh --pyxis: never here, apptainer has none)
    assert [line for line in lines if line.startswith("script=")] == [
        "script=verify-hopper-h100${variant}.sh",
        "script=verify-hopper-l4${variant}.sh",
        "script=verify-ada-l4-h100${variant}.sh",
        "script=verify-ada-l4-l4${variant}.sh",
    ]
    assert "variant=" in lines and "--pyxis" not in text
    assert submitted == [
        ["$here/$script", "$candidate_1"],
        ["$here/$script", "$candidate_1"],
        ["$here/$script", "$candidate_2"],
        ["$here/$script", "$candidate_2"],
        [
            "--dependency=afterok:$dependency",
            "--kill-on-invalid-dep=yes",
            "$here/promote.sh",
            "hopper=$candidate_1",
            "ada.l4=$candidate_2",
        ],
    ]
    assert lines.count('ids+=("$id")') == 4 and 'dependency=$(IFS=:; echo "${ids[*]}")' in lines
    assert '  id=$(sbatch --parsable "$@")' in lines
    assert (
        "mkdir -p /shared/eb/hopper/h100 /shared/eb/hopper/l4 /shared/eb/ada-l4/h100 /shared/eb/ada-l4/l4"
        in lines
    )


@pytest.mark.parametrize(
    "args",
    [
        [
            "-f",
            str(TWO),
            "--runtime",
            "charliecloud",
            "--partition",
            "h100",
            "--partition",
            "l4",
            "--account",
            "a",
        ],
        ["-f", str(CPU), "--runtime", "docker", "--time", "2-00:00:00", "--shared-dir", "/scratch/e b+x"],
        ["-f", str(TORCH_EXAMPLE), "--gres", "gpu:a100:8"],
        ["-f", str(TWO), "--runtime", "enroot", "--partition", "h100"],
    ],
    ids=["two-partitions", "cpu", "torch", "enroot-with-pyxis"],
)
def test_every_script_is_shellcheck_clean(tmp_path: Path, args: list[str]) -> None:
    if "/scratch/e b+x" in args:  # a space cannot go into an #SBATCH line: refused, then a plain one
        assert main(["ci", "slurm", *args, "-o", str(tmp_path / "refused")]) == 2
        args = [a.replace("/scratch/e b+x", "/scratch/e+b_x.1") for a in args]
    out = written(tmp_path, *args)
    paths = sorted(out.glob("*.sh"))
    assert len(paths) >= 3 and all(p.stat().st_mode & 0o111 for p in paths)
    checked = shellcheck(*paths)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--partition", "gpu;reboot"),
        ("--partition", "gpu\n#SBATCH --uid=0"),
        ("--partition", "$(id)"),
        ("--account", "acct`id`"),
        ("--account", "a b"),
        ("--shared-dir", "/shared;rm -rf /"),
        ("--shared-dir", "/shared/$(id)"),
        ("--shared-dir", "/shared\n#SBATCH --uid=0"),
        ("--shared-dir", "relative/dir"),
        ("--time", "1:00:00;id"),
        ("--gres", "gpu:1 --uid=0"),
    ],
)
def test_injection_attempts_are_refused_naming_the_flag(
    tmp_path: Path, capsys, flag: str, value: str
) -> None:
    out = tmp_path / "out"
    code = main(["ci", "slurm", "-f", str(TWO), flag, value, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and flag in err and "fix:" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "candidate",
    [
        "",
        f"ghcr.io/acme/train@{DIGEST};id",
        f"ghcr.io/acme/train@{DIGEST}\nid",
        f"ghcr.io/acme/other@{DIGEST}",  # another repository: promote copies within the spec's
        "ghcr.io/acme/train:latest",
        f"ghcr.io/acme/train@{DIGEST[:-1]}",
    ],
    ids=["empty", "semicolon", "newline", "other-repository", "tag", "short-digest"],
)
def test_the_scripts_refuse_a_candidate_that_is_not_the_specs_repository_by_digest(
    tmp_path: Path, candidate: str
) -> None:
    out = written(tmp_path, "-f", str(TWO), "--shared-dir", str(tmp_path / "shared"))
    env = {"PATH": "/usr/bin:/bin", "ENVBUILD": "false"}  # nothing past the check may run
    for script, args in (
        ("verify-hopper-any.sh", [candidate]),
        ("promote.sh", [f"hopper={candidate}", f"ada.l4=ghcr.io/acme/train@{DIGEST}"]),
        ("submit.sh", [f"hopper={candidate}", f"ada.l4=ghcr.io/acme/train@{DIGEST}"]),
    ):
        done = subprocess.run(["bash", str(out / script), *args], capture_output=True, text=True, env=env)
        assert done.returncode == 2, (script, done.stdout, done.stderr)
        assert "sha256:<64 hex digits>" in done.stderr
    assert not (tmp_path / "shared").exists()


def test_submit_refuses_an_unknown_or_missing_target(tmp_path: Path) -> None:
    out = written(tmp_path, "-f", str(TWO), "--shared-dir", str(tmp_path / "shared"))
    good = f"ghcr.io/acme/train@{DIGEST}"
    env = {"PATH": "/usr/bin:/bin"}
    for args in ([f"hopper={good}"], [f"hopper={good}", f"ada.l4={good}", f"blackwell={good}"], []):
        done = subprocess.run(
            ["bash", str(out / "submit.sh"), *args], capture_output=True, text=True, env=env
        )
        assert done.returncode == 2 and "usage:" in done.stderr, (args, done.stderr)
    assert not (tmp_path / "shared").exists()


def test_a_target_with_several_platforms_is_refused(tmp_path: Path, capsys) -> None:
    spec = GOLDEN / "ci" / "platforms.toml"
    assert main(["ci", "slurm", "-f", str(spec), "-o", str(tmp_path / "out")]) == 2
    assert "several platforms" in capsys.readouterr().err


def test_enroot_jobs_get_a_pyxis_variant_that_srun_runs_and_envbuild_judges(matrix: Matrix) -> None:
    """pyxis runs the candidate through Enroot (srun --container-image=REGISTRY#REPO@DIGEST); envbuild
    on the node judges the program's output with the same gates (verify --from-log --runtime enroot)."""
    files = scripts(matrix, TWO, runtime="enroot", partitions=["h100"])
    assert sorted(files) == [
        "README.md",
        "build-sif-ada-l4.sh",
        "build-sif-hopper.sh",
        "promote.sh",
        "submit.sh",
        "verify-ada-l4-h100.pyxis.sh",
        "verify-ada-l4-h100.sh",
        "verify-hopper-h100.pyxis.sh",
        "verify-hopper-h100.sh",
    ]
    text = files["verify-hopper-h100.pyxis.sh"]
    lines = logical_lines(text)
    (srun,) = [line for line in lines if line.startswith("srun ")]
    assert shlex.split(srun.split(" >", 1)[0]) == [
        "srun",
        "--ntasks=1",
        "--container-image=$image",
        "--container-name=$container",
        "--no-container-mount-home",
        "--no-container-remap-root",
        "--no-container-entrypoint",
        "--container-workdir=/tmp",
        "python",
        "/opt/envbuild/smoke.py",
        "--device",
        "gpu",
        "--steps",
        "7",  # the spec's [smoke]
        "--precision",
        "bf16",
    ]
    assert srun.endswith('>"$out/smoke.log" || status=$?')
    assert "image='ghcr.io#acme/train'\"@${candidate#*@}\"" in lines
    (judged,) = envbuild_commands(text)
    assert judged[:2] == ["verify", "$candidate"]
    assert judged[judged.index("--from-log") + 1] == "$out/smoke.log"
    assert judged[judged.index("--runtime") + 1] == "enroot"
    assert judged[judged.index("--report") + 1] == "$out/report.json"
    assert "#SBATCH --gres=gpu:1" in lines and "#SBATCH --partition=h100" in lines
    submit = logical_lines(files["submit.sh"])
    assert "if [[ ${1:-} == --pyxis ]]; then" in submit and "  variant=.pyxis" in submit
    # apptainer and charliecloud have no pyxis variant
    assert not [name for name in scripts(matrix, TWO, runtime="charliecloud") if ".pyxis" in name]
