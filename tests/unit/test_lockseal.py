"""The lock's seal: where the HMAC key comes from, and what the seal says about an edited lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import LockError, UsageError
from envbuild.lockfile.seal import content_digest, content_hmac, judge_seal, lock_key, seal_problems

KEY = b"k" * 32
BODY = 'lock-version = 1\nenvbuild = "0.1.0"\n'


def test_the_key_comes_from_the_file_then_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ENVBUILD_LOCK_KEY", raising=False)
    assert lock_key(None) is None
    monkeypatch.setenv("ENVBUILD_LOCK_KEY", "")  # an undefined CI secret expands to ""
    assert lock_key(None) is None
    monkeypatch.setenv("ENVBUILD_LOCK_KEY", "e" * 20)
    assert lock_key(None) == b"e" * 20
    (tmp_path / "key").write_text("f" * 20 + "\n")
    assert lock_key(str(tmp_path / "key")) == b"f" * 20  # the file wins, its newline stripped


@pytest.mark.parametrize("how", ["short env", "short file", "missing file", "directory"])
def test_an_unusable_key_is_a_usage_error(tmp_path: Path, monkeypatch, how: str) -> None:
    monkeypatch.delenv("ENVBUILD_LOCK_KEY", raising=False)
    path = None
    if how == "short env":
        monkeypatch.setenv("ENVBUILD_LOCK_KEY", "short")
    elif how == "short file":
        path = tmp_path / "key"
        path.write_text("short")
    elif how == "missing file":
        path = tmp_path / "nope"
    else:
        path = tmp_path
    with pytest.raises(UsageError) as caught:
        lock_key(str(path) if path else None)
    assert caught.value.fix


def test_the_seal_names_each_problem() -> None:
    digest, mac = content_digest(BODY), content_hmac(BODY, KEY)
    assert seal_problems("envbuild.lock", BODY, digest, mac, KEY) == []
    assert seal_problems("envbuild.lock", BODY, digest, None, None) == []
    edited = BODY.replace("0.1.0", "0.1.1")
    assert ["edited by hand" in p for p in seal_problems("envbuild.lock", edited, digest, mac, None)] == [
        True
    ]
    resealed = seal_problems("envbuild.lock", edited, content_digest(edited), mac, KEY)
    assert len(resealed) == 1 and "does not reproduce" in resealed[0]
    unsigned = seal_problems("envbuild.lock", BODY, digest, None, KEY)
    assert len(unsigned) == 1 and "carries no content-hmac" in unsigned[0]
    other_key = seal_problems("envbuild.lock", BODY, digest, content_hmac(BODY, b"o" * 32), KEY)
    assert len(other_key) == 1


def test_judging_refuses_or_warns_when_allowed() -> None:
    warnings: list[str] = []
    with pytest.raises(LockError) as caught:
        judge_seal(
            "envbuild.lock",
            BODY,
            "sha256:" + "0" * 64,
            None,
            key=None,
            allow_edited=False,
            warn=warnings.append,
        )
    assert "edited by hand" in caught.value.message and "--allow-edited-lock" in (caught.value.fix or "")
    judge_seal(
        "envbuild.lock", BODY, "sha256:" + "0" * 64, None, key=None, allow_edited=True, warn=warnings.append
    )
    assert len(warnings) == 1 and warnings[0].startswith("--allow-edited-lock: ")
