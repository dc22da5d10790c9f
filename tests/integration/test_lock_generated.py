"""`envbuild lock --check` names the generated CI files that went stale (issue 38), on a real lock made
against the loopback indexes: a workflow that matches passes with the lock, a hand-edited one fails the
same gate, as a `generated` problem in --json, with the command that makes it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.locking import run_lock, spec_text

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
INSTALL = "envbuild==0.1.0"


@pytest.fixture
def project(capsys, tmp_path: Path, indexes, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with a fresh lock and the workflow `ci github` writes for it."""
    user, framework = indexes
    (tmp_path / ".git").mkdir()
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    code, _, err = run_lock(capsys, tmp_path, "--base-image", BASE)
    assert code == 0, err
    monkeypatch.chdir(tmp_path)
    assert main(["ci", "github", "--install", INSTALL, "--base-image", BASE]) == 0
    capsys.readouterr()
    return tmp_path


def test_lock_check_passes_with_a_current_workflow_and_names_a_stale_one(capsys, project: Path) -> None:
    code, out, err = run_lock(capsys, project, "--check", "--offline", "--base-image", BASE)
    assert code == 0, err
    workflow = project / ".github" / "workflows" / "envbuild.yml"
    workflow.write_text(workflow.read_text().replace("lock-check", "lock-chekc", 1))
    code, out, err = run_lock(capsys, project, "--check", "--offline", "--base-image", BASE)
    assert code == 1
    assert f"{workflow} is stale (differs); run `envbuild ci github --file envbuild.toml" in err
    assert "fix: run the commands named above and commit what they write" in err
    code, out, _ = run_lock(capsys, project, "--check", "--offline", "--json", "--base-image", BASE)
    (generated,) = json.loads(out)["problems"]
    assert code == 1 and generated["kind"] == "generated" and generated["locked"] == str(workflow)
    assert generated["wanted"].startswith("envbuild ci github ")
    assert main(generated["wanted"].split()[1:]) == 0  # the fix it names, run as given, mends it
    capsys.readouterr()
    assert run_lock(capsys, project, "--check", "--offline", "--base-image", BASE)[0] == 0
