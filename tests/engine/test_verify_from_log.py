"""`envbuild verify REPO@sha256:... --from-log FILE` (issue 22, part C): the output of a smoke run
that Kubernetes ran (`kubectl logs job/NAME`), judged with the same schema and gates as every runtime,
the image id from the registry, and promoted from the report by `promote --to --report`.

The logs are real: the torch smoke program run on CPU with this venv's torch, stdout and stderr merged
as `kubectl logs` merges them. The image is a layerless one put in Debian's docker-registry on
loopback (marked docker with the other registry tests); nothing runs in a container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from envbuild.oci.registry import resolve_digest
from tests.helpers.paths import REPO
from tests.helpers.registry import upload_image

pytestmark = pytest.mark.docker

PROGRAMS = REPO / "envbuild" / "smoke" / "programs"


def smoke_log(directory: Path, name: str, **env: str) -> Path:
    """What `kubectl logs` prints for the torch smoke program's run on CPU (stdout and stderr)."""
    done = subprocess.run(
        [sys.executable, str(PROGRAMS / "torch_smoke.py"), "--device", "cpu", "--steps", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    path = directory / name
    path.write_text(done.stdout)
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("logs")
    passed = smoke_log(directory, "passed.log")
    failed = smoke_log(directory, "lr0.log", ENVBUILD_SMOKE_LR="0")
    cut = directory / "cut.log"
    cut.write_text(passed.read_text().rstrip("\n")[:-40])  # a pod killed mid-write
    return {"passed": passed, "failed": failed, "cut": cut}


@pytest.fixture(scope="module")
def candidate(anonymous_registry: str) -> tuple[str, str, str]:
    """(REPO@sha256:..., the repository, its registry) of a layerless image carrying envbuild's
    verified label, pushed under a fresh repository."""
    repo = f"envbuild-test/fromlog-{uuid.uuid4().hex[:8]}"
    digest = upload_image(anonymous_registry, repo, "candidate")
    return f"{anonymous_registry}/{repo}@{digest}", f"{anonymous_registry}/{repo}", anonymous_registry


def test_a_passing_log_makes_a_kubernetes_report_that_promote_accepts(
    logs, candidate, tmp_path: Path, capsys
) -> None:
    ref, repository, _ = candidate
    report, record = tmp_path / "smoke.json", tmp_path / "record.json"
    args = ["verify", ref, "--from-log", str(logs["passed"]), "--smoke-device", "cpu"]
    assert main([*args, "--report", str(report), "--record", str(record)]) == 0
    document = json.loads(report.read_text())
    assert document["report"]["runtime"] == "kubernetes" and document["report"]["passed"] is True
    assert json.loads(record.read_text())["runtime"] == "kubernetes"
    capsys.readouterr()
    assert main(["promote", ref, "--to", f"{repository}:verified-k8s", "--report", str(report)]) == 0
    assert resolve_digest(f"{repository}:verified-k8s") == ref.partition("@")[2]


def test_a_failing_log_is_judged_failed_and_promotes_nothing(logs, candidate, tmp_path: Path, capsys) -> None:
    ref, repository, host = candidate
    report = tmp_path / "smoke.json"
    args = [
        "verify",
        ref,
        "--from-log",
        str(logs["failed"]),
        "--smoke-device",
        "cpu",
        "--report",
        str(report),
    ]
    assert main(args) == 1
    assert json.loads(report.read_text())["report"]["passed"] is False
    assert "training" in capsys.readouterr().out
    assert main(["promote", ref, "--to", f"{repository}:lr0", "--report", str(report)]) == 1
    path = repository.removeprefix(host + "/")
    assert requests.head(f"http://{host}/v2/{path}/manifests/lr0", timeout=10).status_code == 404


def test_a_cut_off_log_is_a_failure_that_says_so(logs, candidate, capsys) -> None:
    ref, _, _ = candidate
    assert main(["verify", ref, "--from-log", str(logs["cut"]), "--smoke-device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "cut off" in err and str(logs["cut"]) in err and "Traceback" not in err


def test_a_log_with_no_report_or_an_image_by_tag_is_refused(candidate, tmp_path: Path, capsys) -> None:
    ref, repository, _ = candidate
    empty = tmp_path / "pending.log"
    empty.write_text('Error from server (BadRequest): container "smoke" in pod is waiting to start\n')
    assert main(["verify", ref, "--from-log", str(empty), "--smoke-device", "cpu"]) == 1
    assert "no smoke report" in capsys.readouterr().err
    assert main(["verify", f"{repository}:candidate", "--from-log", str(empty)]) == 2
    assert "by digest" in capsys.readouterr().err
    assert main(["verify", ref, "--from-log", str(tmp_path / "missing.log")]) == 2
    assert "--from-log" in capsys.readouterr().err


def test_a_pyxis_jobs_log_names_enroot_as_what_ran_it(logs, candidate, tmp_path: Path) -> None:
    """`envbuild ci slurm --runtime enroot`'s pyxis jobs judge srun's output with --runtime enroot."""
    ref, _, _ = candidate
    report = tmp_path / "smoke.json"
    args = ["verify", ref, "--from-log", str(logs["passed"]), "--smoke-device", "cpu", "--runtime", "enroot"]
    assert main([*args, "--report", str(report)]) == 0
    assert json.loads(report.read_text())["report"]["runtime"] == "enroot"
