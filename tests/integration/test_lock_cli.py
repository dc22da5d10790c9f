"""`envbuild lock` misuse and `lock --check --json` (issue 17, items 5 and 13), against the loopback
indexes the other lock tests use: a typo in --target or --upgrade is exit 2 and changes nothing, and
the drift --check finds is a JSON document a CI step can act on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.lockfile.model import LockedPackage
from envbuild.lockfile.problem import KINDS
from envbuild.lockfile.read import load_lock
from tests.helpers.locking import forge, run_lock, spec_text

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
PROBLEM_KEYS = {"kind", "target", "platform", "field", "package", "locked", "wanted", "message"}


@pytest.fixture
def locked(capsys, tmp_path: Path, indexes) -> Path:
    """A project with a fresh, matching envbuild.lock."""
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    code, _, err = run_lock(capsys, tmp_path, "--base-image", BASE)
    assert code == 0, err
    return tmp_path


def check_json(capsys, project: Path, *args: str) -> tuple[int, dict]:
    code, out, err = run_lock(capsys, project, "--check", "--json", *args)
    document = json.loads(out)
    assert set(document) == {"ok", "lock", "spec", "problems"}, err
    for found in document["problems"]:
        assert set(found) == PROBLEM_KEYS and found["kind"] in KINDS
        assert all(value is None or isinstance(value, str) for value in found.values())
    return code, document


def test_upgrade_of_a_package_the_lock_lacks_exits_2_and_writes_nothing(capsys, locked: Path) -> None:
    before = (locked / "envbuild.lock").read_bytes()
    code, out, err = run_lock(capsys, locked, "--upgrade", "notapkg", "--base-image", BASE)
    assert code == 2
    assert "unchanged" not in out
    assert "--upgrade 'notapkg': not a package of" in err and "fix: " in err
    code, _, err = run_lock(capsys, locked, "--upgrade", "lbi", "--base-image", BASE)
    assert code == 2 and "did you mean lib" in err
    assert (locked / "envbuild.lock").read_bytes() == before


def test_upgrade_of_a_locked_package_still_works(capsys, locked: Path) -> None:
    code, out, err = run_lock(capsys, locked, "--upgrade", "lib", "Base", "--base-image", BASE)
    assert code == 0, err
    assert "wrote " in out


def test_upgrade_without_a_lock_checks_the_resolved_closure(capsys, tmp_path: Path, indexes) -> None:
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    code, _, err = run_lock(capsys, tmp_path, "--upgrade", "notapkg", "--base-image", BASE)
    assert code == 2 and "notapkg" in err
    assert not (tmp_path / "envbuild.lock").exists()


def test_check_of_one_target(capsys, locked: Path) -> None:
    code, out, _ = run_lock(capsys, locked, "--check", "--target", "default")
    assert code == 0 and "(target default)" in out
    code, _, err = run_lock(capsys, locked, "--check", "--target", "nope")
    assert code == 2 and "--target 'nope' is not a target of" in err and "use one of: default" in err


def test_check_json_of_a_matching_lock(capsys, locked: Path) -> None:
    code, document = check_json(capsys, locked)
    assert code == 0
    assert document["ok"] is True and document["problems"] == []
    assert document["lock"] == str(locked / "envbuild.lock")


def test_check_json_names_spec_drift_field_by_field(capsys, locked: Path, indexes) -> None:
    user, framework = indexes
    pip = '["app[fast]", "lib==2.0", "base"]'
    (locked / "envbuild.toml").write_text(spec_text(user.url, framework.url, pip))
    code, document = check_json(capsys, locked)
    assert code == 1 and document["ok"] is False
    kinds = {p["kind"]: p for p in document["problems"]}
    assert kinds["spec"]["field"] == "spec-digest" and kinds["spec"]["locked"] != kinds["spec"]["wanted"]
    added = next(p for p in document["problems"] if p["kind"] == "drift" and p["field"] == "requirements")
    assert added["target"] == "default" and added["locked"] is None and added["wanted"] == "base"
    assert added["message"] == "target 'default': requirement added: base"


def test_check_json_names_a_forged_hash_as_stale_with_the_package(capsys, locked: Path) -> None:
    path = locked / "envbuild.lock"
    lock, _ = load_lock(str(path))
    (target,) = lock.targets
    lib = next(p for p in target.packages if p.name == "lib")
    forged_lib = LockedPackage(
        name=lib.name, version=lib.version, layer=lib.layer, index=lib.index, hashes=("sha256:" + "0" * 64,)
    )
    packages = tuple(forged_lib if p is lib else p for p in target.packages)
    path.write_text(forge(lock.replace(targets=(target.replace(packages=packages),))))
    code, document = check_json(capsys, locked)
    assert code == 1
    stale = [p for p in document["problems"] if p["kind"] == "stale" and p["package"] == "lib"]
    assert stale == [
        {
            "kind": "stale",
            "target": "default",
            "platform": "linux/amd64",
            "field": "hashes",
            "package": "lib",
            "locked": "sha256:" + "0" * 64,
            "wanted": " ".join(lib.hashes),
            "message": f"target 'default': package lib: hashes sha256:{'0' * 64} -> {' '.join(lib.hashes)}",
        }
    ]
    code, _, err = run_lock(capsys, locked, "--check")  # the text form says the same, exit 1
    assert code == 1 and "package lib: hashes" in err and "a forged or stale pin" in err


def test_check_json_of_a_hand_edit_and_of_a_missing_lock(capsys, locked: Path) -> None:
    path = locked / "envbuild.lock"
    path.write_text(path.read_text().replace('"2.0"', '"2.1"', 1))
    code, document = check_json(capsys, locked, "--offline")
    assert code == 1
    seal = document["problems"][0]
    assert seal["kind"] == "seal" and "edited by hand" in seal["message"]
    path.unlink()
    code, document = check_json(capsys, locked)
    assert code == 1
    assert document["problems"] == [
        {
            "kind": "unreadable",
            "target": None,
            "platform": None,
            "field": None,
            "package": None,
            "locked": None,
            "wanted": None,
            "message": f"{path} does not exist",
        }
    ]
