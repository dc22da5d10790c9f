"""Reading the batch scripts `envbuild ci slurm` writes, checking them with the real shellcheck, and
waiting on the real one-node Slurm cluster .ci/run starts (munged, slurmctld, slurmd)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.capability import missing

ENVBUILD_COMMAND = '"${envbuild[@]}"'
FINISHED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "DEADLINE",
}


def shellcheck(*paths: Path) -> subprocess.CompletedProcess[str]:
    """The real shellcheck over `paths` (every warning level)."""
    binary = shutil.which("shellcheck")
    if binary is None:
        missing("shellcheck is not on PATH (.ci/run installs Debian's shellcheck)")
    return subprocess.run([binary, "--severity=style", *map(str, paths)], capture_output=True, text=True)


def sbatch_options(text: str) -> list[tuple[str, str]]:
    """The (--option, value) pairs of a script's #SBATCH lines, in order."""
    pairs = []
    for line in text.splitlines():
        if line.startswith("#SBATCH "):
            option, _, value = line[len("#SBATCH ") :].partition("=")
            pairs.append((option, value))
    return pairs


def logical_lines(text: str) -> list[str]:
    """The script's lines with backslash continuations joined."""
    return text.replace("\\\n", " ").splitlines()


def envbuild_commands(text: str) -> list[list[str]]:
    """The words after "${envbuild[@]}" of every envbuild command line, as bash splits them (the lines
    hold quoted literals and "$var" words only), up to the first redirection or control operator
    (`2>&1 | tee ...`): the arguments envbuild itself gets."""
    commands = []
    for line in logical_lines(text):
        if not line.strip().startswith(ENVBUILD_COMMAND):
            continue
        words = shlex.split(line.strip()[len(ENVBUILD_COMMAND) :])
        ends = [
            i for i, word in enumerate(words) if word in _OPERATORS or word[:1] in "<>" or word[:2] == "2>"
        ]
        commands.append(words[: ends[0]] if ends else words)
    return commands


_OPERATORS = {"|", "||", "&&", ";", "&"}


def require_cluster() -> str:
    """The node name of a running cluster whose node is up (idle or busy), else fail/skip."""
    if shutil.which("sbatch") is None:
        missing("sbatch is not on PATH (.ci/run installs Debian's slurmctld, slurmd, slurm-client, munge)")
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
    up = [line.split()[0] for line in done.stdout.splitlines() if line.split()[1:] and "down" not in line]
    if done.returncode != 0 or not up:
        missing(f"no Slurm node is up (.ci/run starts one): {done.stdout.strip()} {done.stderr.strip()}")
    return up[0]


def job_field(job_id: str, field: str) -> str:
    """One field (JobState, RunTime) as scontrol shows it (slurm.conf's MinJobAge keeps a finished
    job for 300 s); "GONE" once Slurm has forgotten the job."""
    shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
    for word in shown.stdout.split():
        if word.startswith(f"{field}="):
            return word[len(field) + 1 :]
    return "GONE"


def job_state(job_id: str) -> str:
    return job_field(job_id, "JobState")


def wait_for_jobs(job_ids: list[str], deadline_s: float, logs: Path) -> dict[str, str]:
    """Poll until every job has finished; its final states. Past the (generous) deadline: fail with
    the jobs' states and every log under `logs`."""
    end = time.monotonic() + deadline_s
    while True:
        states = {job_id: job_state(job_id) for job_id in job_ids}
        if all(state in FINISHED or state == "GONE" for state in states.values()):
            return states
        if time.monotonic() > end:
            subprocess.run(["scancel", *job_ids], check=False)
            shown = "\n".join(
                f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(logs.rglob("*.out"))
            )
            pytest.fail(f"Slurm jobs still not finished after {deadline_s:.0f} s: {states}\n{shown}")
        time.sleep(2)
