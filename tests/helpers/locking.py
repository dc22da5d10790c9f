"""The project `envbuild lock` tests lock: torch 2.13.0 from one loopback index, user packages from
another, for Python 3.11 on Debian 12."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.spec.lockfile import Lock, dumps


def spec_text(user_url: str, framework_url: str, pip: str = '["app[fast]", "lib==2.0"]') -> str:
    return (
        f'[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = {pip}\nindex-url = "{user_url}"\nframework-index-url = "{framework_url}"\n'
    )


def run_lock(capsys: pytest.CaptureFixture[str], project: Path, *args: str) -> tuple[int, str, str]:
    """`envbuild lock -f project/envbuild.toml ARGS`: (exit code, stdout, stderr)."""
    code = main(["lock", "-f", str(project / "envbuild.toml"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def forge(lock: Lock, keep_hmac_from: str | None = None) -> str:
    """The text an attacker without the key writes: the edited lock, its content digest recomputed
    (the digest is unkeyed), and the HMAC line of the lock it replaced kept as it was."""
    text = dumps(lock)
    if keep_hmac_from is not None:
        line = next(x for x in keep_hmac_from.splitlines(True) if x.startswith("content-hmac = "))
        head, digest_line, body = text.partition("\n" + "content-digest = ")
        digest_line, _, body = body.partition("\n")
        text = f"{head}\ncontent-digest = {digest_line}\n{line}{body}"
    return text


def write_key(directory: Path) -> Path:
    """A lock key file, as a team's CI secret would hold it."""
    path = directory / "lock.key"
    path.write_text("k" * 40 + "\n")
    return path
