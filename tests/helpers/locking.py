"""The project `envbuild lock` tests lock: torch 2.13.0 from one loopback index, user packages from
another, for Python 3.11 on Debian 12."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.model import Lock, dumps


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


@contextlib.contextmanager
def no_network(monkeypatch: pytest.MonkeyPatch, uv_cache: Path) -> Iterator[str]:
    """Every way out to an index closed, as issue 18 runs the no-op relock: HTTP(S)_PROXY in both
    cases at a loopback port that refuses connections (bound, never listening), NO_PROXY cleared so
    loopback indexes go through it too, UV_OFFLINE=1, and an empty uv cache, so nothing uv fetched
    before can answer. Yields the proxy URL."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))  # held, not listening: a connect is refused, and no one else gets it
        proxy = f"http://127.0.0.1:{closed.getsockname()[1]}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("UV_OFFLINE", "1")
        uv_cache.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
        yield proxy
