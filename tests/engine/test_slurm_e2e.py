"""`envbuild ci slurm --runtime charliecloud` end to end on the real one-node Slurm cluster .ci/run
starts (issue 22, part B): the torch image pushed to the registry on 127.0.0.1 and addressed by
digest, the generated submit.sh run with sbatch, the verify job's smoke step run by ch-run, and the
promote job, which depends on it (afterok), tagging in the registry. A candidate whose smoke step
fails (learning rate 0: the loss cannot decrease) fails its verify job, and Slurm cancels the promote
job behind it (--kill-on-invalid-dep): it never runs, and no tag appears.

Both cases are submitted before either is waited on, so the node runs them side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from tests.helpers.capability import missing
from tests.helpers.docker import TORCH_SPEC, docker
from tests.helpers.registry import manifest_digest, push
from tests.helpers.slurm import job_field, require_cluster, wait_for_jobs

pytestmark = pytest.mark.docker
REPOSITORY = "envbuild-test/slurm-e2e"
DEADLINE_S = 1200  # generous: both cases convert a 1.2 GB image with ch-convert on a shared node
LOGS = ("verify", "promote")


class Case:
    """One spec, its candidate in the registry and the jobs submit.sh started for it."""

    def __init__(self, name: str, root: Path, registry: str, candidate: str, final: str) -> None:
        self.name = name
        self.root = root
        self.shared = root / "shared"
        self.candidate = candidate
        self.final = final
        self.spec = root / "envbuild.toml"
        self.spec.write_text(
            TORCH_SPEC + f'\n[image]\nrepository = "{registry}/{REPOSITORY}"\ntags = ["{final}"]\n'
        )
        self.jobs: dict[str, str] = {}  # script -> job id


@pytest.fixture
def candidates() -> Iterator[list[str]]:
    """Candidate refs a test pushed: removed from the Engine afterwards (the runtime pulled them)."""
    made: list[str] = []
    yield made
    for ref in made:
        docker("rmi", "-f", ref, check=False)


def candidate_image(workdir: Path, base: str, registry: str, extra: str, made: list[str]) -> str:
    """A fresh candidate (a new label, so a new digest) FROM the torch image, pushed and addressed by
    digest; not left local, so the runtime fetches it by digest."""
    marker = uuid.uuid4().hex[:12]
    workdir.mkdir()
    (workdir / "Dockerfile").write_text(f'FROM {base}\n{extra}LABEL envbuild.test.run="{marker}"\n')
    tag = f"{registry}/{REPOSITORY}:candidate-{marker}"
    docker("build", "-q", "-t", tag, str(workdir))
    push(tag)
    digest = manifest_digest(registry, REPOSITORY, f"candidate-{marker}")
    docker("rmi", tag)
    made.append(f"{registry}/{REPOSITORY}@{digest}")
    return made[-1]


def tags_of(registry: str) -> list[str]:
    response = requests.get(f"http://{registry}/v2/{REPOSITORY}/tags/list", timeout=30)
    assert response.status_code == 200, response.text
    return response.json().get("tags") or []


def submit(case: Case, env: dict[str, str]) -> None:
    """`envbuild ci slurm` for the case's spec, then its submit.sh with the candidate."""
    out = case.root / "slurm"
    args = ["ci", "slurm", "-f", str(case.spec), "--runtime", "charliecloud", "--time", "00:30:00"]
    assert main([*args, "--shared-dir", str(case.shared), "-o", str(out)]) == 0
    done = subprocess.run(
        [str(out / "submit.sh"), f"default={case.candidate}"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in done.stdout.splitlines():  # "<job id> <script>"
        job_id, script = line.split()
        case.jobs[script] = job_id
    assert set(case.jobs) == {"verify-default-any.sh", "promote.sh"}, done.stdout


def logs(case: Case, kind: str) -> list[Path]:
    return sorted(case.shared.rglob(f"{kind}-*.out"))


def test_slurm_verify_then_promote_and_a_failing_smoke_step_cancels_promote(
    tmp_path: Path, torch_image: str, anonymous_registry: str, candidates: list[str]
) -> None:
    require_cluster()
    for tool in ("ch-convert", "ch-run"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not on PATH (.ci/run installs Debian's charliecloud-runtime and -builders)")
    run = uuid.uuid4().hex[:8]
    passing = Case(
        "passing",
        tmp_path / "passing",
        anonymous_registry,
        candidate_image(tmp_path / "passing", torch_image, anonymous_registry, "", candidates),
        f"slurm-ok-{run}",
    )
    failing = Case(
        "failing",
        tmp_path / "failing",
        anonymous_registry,
        # what an [image] env = { ENVBUILD_SMOKE_LR = "0" } spec builds: the loss cannot decrease
        candidate_image(
            tmp_path / "failing", torch_image, anonymous_registry, "ENV ENVBUILD_SMOKE_LR=0\n", candidates
        ),
        f"slurm-lr0-{run}",
    )
    runtime_dir = tmp_path / "unpacked"
    runtime_dir.mkdir()
    env = {
        **os.environ,
        "ENVBUILD": f"{sys.executable} -m envbuild",
        "ENVBUILD_RUNTIME_DIR": str(runtime_dir),
    }
    started = time.monotonic()
    for case in (passing, failing):  # both in the queue before either is waited on
        submit(case, env)
    job_ids = [job for case in (passing, failing) for job in case.jobs.values()]
    states = wait_for_jobs(job_ids, DEADLINE_S, tmp_path)
    ran = {
        f"{case.name} {script}": job_field(job, "RunTime")
        for case in (passing, failing)
        for script, job in case.jobs.items()
    }
    print(
        f"slurm e2e: both cases finished {time.monotonic() - started:.0f} s after submission; jobs ran {ran}"
    )

    shown = "\n".join(
        f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(tmp_path.rglob("*.out"))
    )
    # passing: the verify job passed with Charliecloud and wrote its report and record to the shared
    # directory; promote ran after it and tagged the candidate's digest in the registry
    assert states[passing.jobs["verify-default-any.sh"]] == "COMPLETED", (states, shown)
    assert states[passing.jobs["promote.sh"]] == "COMPLETED", (states, shown)
    out = passing.shared / "default" / "any"
    report = json.loads((out / "report.json").read_text())
    record = json.loads((out / "record.json").read_text())
    assert report["report"]["passed"] is True and report["report"]["runtime"] == "charliecloud"
    assert (
        record["runtime"] == "charliecloud"
        and record["slurm"]["job-id"] == passing.jobs["verify-default-any.sh"]
    )
    (promote_log,) = logs(passing, "promote")
    assert passing.final in promote_log.read_text()
    assert (
        manifest_digest(anonymous_registry, REPOSITORY, passing.final) == passing.candidate.split("@", 1)[1]
    )

    # failing: the verify job failed on the training gate, promote was cancelled without running
    (verify_log,) = logs(failing, "verify")
    assert states[failing.jobs["verify-default-any.sh"]] == "FAILED", (states, shown)
    assert "training" in verify_log.read_text(), shown
    assert states[failing.jobs["promote.sh"]] == "CANCELLED", (states, shown)
    assert logs(failing, "promote") == []
    assert failing.final not in tags_of(anonymous_registry)
    # nothing either verify job unpacked is left behind
    assert list(runtime_dir.iterdir()) == []
