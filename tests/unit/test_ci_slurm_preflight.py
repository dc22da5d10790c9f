"""The image's preflight guard in the Slurm scripts (issue 36, item 5): the pyxis verify job runs it as
its own step in the image and a refusal (exit 78) ends the job with a line naming the node; the runtime
verify job repeats the verdict `envbuild verify` printed; the SIF job builds from render's envbuild.def
by digest and runs the guard before %test; README.md's recipes start with the guard. The scripts run
for real under bash, with stand-ins for srun, apptainer and envbuild on PATH that record their calls.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.preflight import GUARD_COMMAND, STOP_STATUS
from tests.helpers.paths import GOLDEN

TWO = GOLDEN / "ci" / "two.toml"  # GPU smoke; targets "hopper" and "ada.l4", ghcr.io/acme/train
CPU = GOLDEN / "ci" / "cpu.toml"
CANDIDATE = "ghcr.io/acme/train@sha256:" + "ab" * 32
VERDICT = (
    "envbuild preflight: ok: driver 580.65.06 (needs 520.61.05); GPU 0000:62:00.0 NVIDIA H100: 9.0, sass"
)
GUARD = " ".join(GUARD_COMMAND)

# srun and apptainer: record the call; the guard prints its verdict (stdout) or refuses (stderr, 78)
FAKE_RUNNER = f"""#!/bin/sh
echo "$(basename "$0") $*" >>"$CALLS"
case " $* " in
  *" {GUARD} "*)
    if [ "${{GUARD_STATUS:-0}}" -eq {STOP_STATUS} ]; then
      echo "envbuild preflight: stop: driver 470.82.01 is older than 520.61.05" >&2
      exit {STOP_STATUS}
    elif [ "${{GUARD_STATUS:-0}}" -ne 0 ]; then  # an image without the guard
      echo "python: No module named envbuild_preflight" >&2
      exit "$GUARD_STATUS"
    fi
    echo "{VERDICT}"
    exit 0 ;;
esac
if [ "$(basename "$0")" = apptainer ] && [ "$1" = build ]; then
  cp "$6" "$CALLS.def"  # build --notest --build-arg digest=... OUT.sif DEF
  echo sif >"$5"
fi
[ "$1" = test ] && exit "${{TEST_STATUS:-0}}"
echo '{{"passed": true}}'
"""
FAKE_ENVBUILD = """#!/bin/sh
echo "envbuild $*" >>"$CALLS"
if [ -n "${VERIFY_REFUSED:-}" ]; then
  echo "error: the image's preflight guard refused this node: driver 470.82.01 is older than 520.61.05" >&2
  exit 1
fi
echo "torch 2.7.1 on cuda: PASSED"
echo "  envbuild preflight: ok: driver 580.65.06 (needs 520.61.05)"
"""


def generate(tmp_path: Path, spec: Path, *args: str) -> Path:
    out = tmp_path / "slurm"
    assert (
        main(
            ["ci", "slurm", "-f", str(spec), "--shared-dir", str(tmp_path / "shared"), *args, "-o", str(out)]
        )
        == 0
    )
    return out


def run(
    tmp_path: Path, script: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """bash SCRIPT ARGS with the stand-ins first on PATH; the result and the recorded calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_RUNNER), ("apptainer", FAKE_RUNNER), ("envbuild", FAKE_ENVBUILD)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", str(script), *args],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "SLURM_JOB_ID": "4242", **env},
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def node_line(output: str, prefix: str) -> str:
    (line,) = [line for line in output.splitlines() if line.startswith(f"{prefix}: node ")]
    return line


def test_the_pyxis_job_runs_the_guard_in_the_image_first_and_logs_its_verdict(tmp_path: Path) -> None:
    out = generate(tmp_path, TWO, "--runtime", "enroot")
    done, calls = run(tmp_path, out / "verify-hopper-any.pyxis.sh", CANDIDATE)
    assert done.returncode == 0, done.stdout + done.stderr
    guard, smoke, judged = calls
    image = "--container-image=ghcr.io#acme/train@sha256:" + "ab" * 32
    # the same image, in one named container: pyxis imports it once
    for step in (guard, smoke):
        assert image in step.split() and "--container-name=envbuild-verify-4242" in step.split()
    assert guard.endswith(" " + GUARD) and "/opt/envbuild/smoke.py" in smoke
    assert judged.startswith(f"envbuild verify {CANDIDATE} --from-log ")
    assert node_line(done.stdout, "envbuild verify job") == f"envbuild verify job: node {host()}: {VERDICT}"
    assert done.stdout.index(VERDICT) < done.stdout.index("passed on")


def test_a_node_the_guard_refuses_ends_the_pyxis_job_with_78_naming_the_node(tmp_path: Path) -> None:
    out = generate(tmp_path, TWO, "--runtime", "enroot")
    done, calls = run(tmp_path, out / "verify-hopper-any.pyxis.sh", CANDIDATE, GUARD_STATUS=str(STOP_STATUS))
    assert done.returncode == STOP_STATUS
    assert len(calls) == 1 and calls[0].endswith(GUARD)  # no smoke step, no verify
    assert "driver 470.82.01 is older" in done.stderr  # the guard's own message stays in the log
    line = node_line(done.stderr, "envbuild verify job")
    assert (
        host() in line
        and f"refused this node (exit {STOP_STATUS}" in line
        and "smoke step did not run" in line
    )


def test_a_guard_that_did_not_run_is_said_and_the_smoke_step_judges_the_image(tmp_path: Path) -> None:
    out = generate(tmp_path, TWO, "--runtime", "enroot")
    done, calls = run(tmp_path, out / "verify-hopper-any.pyxis.sh", CANDIDATE, GUARD_STATUS="1")
    assert done.returncode == 0 and len(calls) == 3
    assert "no preflight verdict (the guard exited 1)" in node_line(done.stdout, "envbuild verify job")


def test_a_cpu_pyxis_job_runs_the_guard_in_warn_mode(tmp_path: Path) -> None:
    out = generate(tmp_path, CPU, "--runtime", "enroot")
    text = (out / "verify-hopper-any.pyxis.sh").read_text()
    assert "\nexport ENVBUILD_PREFLIGHT=warn" in text
    assert text.index("export ENVBUILD_PREFLIGHT=warn") < text.index("verdict=$(srun")
    assert (
        "ENVBUILD_PREFLIGHT"
        not in (
            generate(tmp_path / "gpu", TWO, "--runtime", "enroot") / "verify-hopper-any.pyxis.sh"
        ).read_text()
    )


@pytest.mark.parametrize("refused", [False, True])
def test_the_runtime_verify_job_repeats_the_verdict_envbuild_verify_printed(
    tmp_path: Path, refused: bool
) -> None:
    out = generate(tmp_path, TWO, "--runtime", "apptainer")
    env = {"ENVBUILD": str(tmp_path / "bin" / "envbuild")} | ({"VERIFY_REFUSED": "1"} if refused else {})
    done, calls = run(tmp_path, out / "verify-hopper-any.sh", CANDIDATE, **env)
    assert len(calls) == 1 and calls[0].startswith(f"envbuild verify {CANDIDATE} --runtime apptainer")  # once
    line = node_line(done.stdout, "envbuild verify job")
    if refused:
        assert done.returncode == 1  # verify's own status, through the pipe
        assert line == (
            f"envbuild verify job: node {host()}: the image's preflight guard refused this node: driver "
            "470.82.01 is older than 520.61.05"
        )
        assert "passed on" not in done.stdout
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        verdict = "envbuild preflight: ok: driver 580.65.06 (needs 520.61.05)"
        assert line == f"envbuild verify job: node {host()}: {verdict}"
        assert "passed on" in done.stdout


def test_the_sif_job_builds_from_renders_definition_by_digest_then_guards_and_tests(tmp_path: Path) -> None:
    out = generate(tmp_path, TWO)
    done, calls = run(tmp_path, out / "build-sif-hopper.sh", CANDIDATE)
    assert done.returncode == 0, done.stdout + done.stderr
    build, guard, test = calls
    assert build.split()[:4] == ["apptainer", "build", "--notest", "--build-arg"]
    assert build.split()[4] == "digest=sha256:" + "ab" * 32
    assert guard.split()[:3] == ["apptainer", "exec", "--nv"] and guard.endswith(GUARD)
    assert test.split()[:3] == ["apptainer", "test", "--nv"]
    assert node_line(done.stdout, "envbuild sif job") == f"envbuild sif job: node {host()}: {VERDICT}"
    # the definition it built from is the one `envbuild render --apptainer` writes, byte for byte
    assert main(["render", "-f", str(TWO), "-o", str(tmp_path / "render"), "--apptainer"]) == 0
    assert (tmp_path / "calls.def").read_text() == (
        tmp_path / "render" / "hopper" / "envbuild.def"
    ).read_text()
    sifs = tmp_path / "shared" / "sif"
    assert [p.name for p in sifs.iterdir() if not p.name.endswith(".out")] == ["hopper-abababababab.sif"]


@pytest.mark.parametrize(
    ("env", "status"), [({"GUARD_STATUS": str(STOP_STATUS)}, STOP_STATUS), ({"TEST_STATUS": "1"}, 1)]
)
def test_a_refused_node_or_a_failed_test_leaves_no_sif(
    tmp_path: Path, env: dict[str, str], status: int
) -> None:
    out = generate(tmp_path, TWO)
    done, calls = run(tmp_path, out / "build-sif-hopper.sh", CANDIDATE, **env)
    assert done.returncode == status
    if status == STOP_STATUS:
        assert len(calls) == 2  # build, guard: no %test
        assert host() in node_line(done.stderr, "envbuild sif job") and "no SIF written" in done.stderr
    assert list((tmp_path / "shared" / "sif").iterdir()) == []  # neither the SIF nor the work directory


@pytest.mark.parametrize(
    "image", ["", CANDIDATE + ";id", "ghcr.io/acme/other@sha256:" + "ab" * 32, "ghcr.io/acme/train:latest"]
)
def test_the_sif_job_refuses_an_image_that_is_not_the_specs_repository_by_digest(
    tmp_path: Path, image: str
) -> None:
    out = generate(tmp_path, TWO)
    done, calls = run(tmp_path, out / "build-sif-hopper.sh", image)
    assert done.returncode == 2 and "sha256:<64 hex digits>" in done.stderr and calls == []
    assert not (tmp_path / "shared").exists()


def test_the_readme_recipes_run_the_guard_first_for_apptainer_and_pyxis(tmp_path: Path) -> None:
    out = generate(tmp_path, TWO)
    text = (out / "README.md").read_text()
    assert not (out / "README.md").stat().st_mode & 0o111
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    recipes = [b.splitlines() for b in blocks if "train.py" in b]
    assert len(recipes) == 4  # Apptainer and pyxis, per target
    for lines in recipes:
        runs = [line for line in lines if line.startswith("srun ")]
        assert lines[0] == "set -euo pipefail" and len(runs) == 2
        assert runs[0].startswith("srun --ntasks-per-node=1 ") and runs[0].endswith(" " + GUARD)
        assert runs[1].endswith(" python train.py")
    sif = f"sif={tmp_path}/shared/sif/hopper-<first 12 hex of the digest>.sif"
    assert sif in text and 'apptainer exec --nv "$sif" python train.py' in text
    assert "image='ghcr.io#acme/train@sha256:<digest>'" in text
    assert "build-sif-hopper.sh ghcr.io/acme/train@sha256:<digest>" in text


def host() -> str:
    return subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
