"""`envbuild lock` with nothing changed (issue 18, item 3): decided from the lock alone, with no
network and no write; anything else relocks as before.

"Nothing changed" is the rule `up_to_date` states: the lock reads strictly, its seal holds (with a
key, its HMAC too), it was written by this envbuild for these exact spec and matrix bytes, and what
the spec and matrix give each target now is what it records (`lock --check --offline` passes). Each
test runs the command under `no_network` (proxies at a port that refuses, UV_OFFLINE=1, an empty uv
cache): a command that is up to date still succeeds, and one that must resolve cannot, which is
how these tests tell "decided from the lock" from "resolved again" without timing anything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from envbuild import __version__
from envbuild.cli.app import main
from envbuild.lockfile.read import load_lock, read_lock
from envbuild.matrix.load import load_matrix
from tests.helpers.locking import forge, no_network, run_lock, spec_text, write_key
from tests.helpers.paths import MATRIX_DIR
from tests.helpers.registry import LoopbackServer, RegistryHandler

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
OTHER_BASE = "debian:bookworm-slim@sha256:" + "b" * 64
PAST = 1_000_000_000 * 10**9  # an mtime in 2001: any rewrite of the lock moves it


@pytest.fixture(scope="module")
def locked_once(tmp_path_factory: pytest.TempPathFactory, indexes) -> Path:
    """A project locked once against the loopback indexes; each test works on a copy."""
    user, framework = indexes
    project = tmp_path_factory.mktemp("noop")
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    assert main(["lock", "-f", str(project / "envbuild.toml"), "--base-image", BASE]) == 0
    return project


@pytest.fixture
def project(locked_once: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(locked_once, copy)
    os.utime(copy / "envbuild.lock", ns=(PAST, PAST))
    return copy


def _served(indexes) -> int:
    user, framework = indexes
    return sum(user.requests.values()) + sum(framework.requests.values())


def _unchanged(lock: Path, before: bytes) -> bool:
    return lock.read_bytes() == before and lock.stat().st_mtime_ns == PAST


@pytest.mark.parametrize(
    "args",
    [(), ("--base-image", BASE), ("--target", "default")],
    ids=["plain", "same-base-image", "one-target"],
)
def test_an_unchanged_lock_is_up_to_date_with_no_network_and_no_write(
    capsys, project: Path, tmp_path: Path, indexes, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """The issue's test. The spec's `app[fast]` is unpinned: an unchanged spec still does not relock
    it (newer versions come with --upgrade)."""
    lock = project / "envbuild.lock"
    before, served = lock.read_bytes(), _served(indexes)
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, err = run_lock(capsys, project, *args)
    assert code == 0, err
    spec = project / "envbuild.toml"
    assert out == f"{lock} is up to date with {spec} and the matrix (1 target); nothing resolved\n"
    assert _unchanged(lock, before)
    assert _served(indexes) == served


def test_an_edited_spec_without_the_network_fails_naming_the_index_and_keeps_the_lock(
    capsys, project: Path, tmp_path: Path, indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, framework = indexes
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url, '["app[fast]", "lib==1.0"]'))
    lock = project / "envbuild.lock"
    before = lock.read_bytes()
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 1, out
    assert "up to date" not in out and "internal error" not in err
    # uv, told UV_OFFLINE=1, names the network ("the network was disabled"), never reaching the proxy
    assert "network" in err or "could not reach" in err, err
    assert _unchanged(lock, before)


def test_a_tampered_hash_is_not_up_to_date_and_a_relock_restores_it(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand edit (digest not recomputed) is never blessed: without the network the relock it
    needs fails and leaves the file as it was; with it, the lock is resolved again as before."""
    lock = project / "envbuild.lock"
    before = lock.read_bytes()
    text = before.decode()
    digest = text.split('"sha256:', 4)[4][:64]  # a package hash (after the three header digests)
    lock.write_text(text.replace(digest, "0" * 64, 1))
    os.utime(lock, ns=(PAST, PAST))
    tampered = lock.read_bytes()
    with monkeypatch.context() as offline, no_network(offline, tmp_path / "uv-cache"):
        code, out, _ = run_lock(capsys, project, "--base-image", BASE)
    assert code == 1 and "up to date" not in out
    assert _unchanged(lock, tampered)
    code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 0, err
    assert f"wrote {lock}" in out and "up to date" not in out
    assert lock.read_bytes() == before  # the real hash, resolved again


def test_a_matrix_change_relocks(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, matrix)
    (matrix / "gpus.toml").write_text((matrix / "gpus.toml").read_text() + "\n# a reviewed edit\n")
    lock = project / "envbuild.lock"
    before = lock.read_bytes()
    with monkeypatch.context() as offline, no_network(offline, tmp_path / "uv-cache"):
        code, out, _ = run_lock(capsys, project, "--base-image", BASE, "--matrix", str(matrix))
    assert code == 1 and "up to date" not in out
    assert _unchanged(lock, before)
    code, out, err = run_lock(capsys, project, "--base-image", BASE, "--matrix", str(matrix))
    assert code == 0, err
    assert f"wrote {lock}" in out
    assert load_lock(str(lock))[0].matrix_digest == load_matrix(str(matrix)).digest != load_matrix().digest


@pytest.mark.parametrize("upgrade", [("--upgrade",), ("--upgrade", "lib")], ids=["all", "named"])
def test_upgrade_always_resolves_again(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upgrade: tuple[str, ...]
) -> None:
    lock = project / "envbuild.lock"
    before = lock.read_bytes()
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, _ = run_lock(capsys, project, "--base-image", BASE, *upgrade)
    assert code == 1 and "up to date" not in out
    assert _unchanged(lock, before)


def test_another_pinned_base_image_relocks(capsys, project: Path) -> None:
    code, out, err = run_lock(capsys, project, "--base-image", OTHER_BASE)
    assert code == 0, err
    assert "up to date" not in out and "base " + BASE + " -> " + OTHER_BASE in out
    assert read_lock(str(project / "envbuild.lock")).lock.targets[0].base_image == OTHER_BASE


class MovingTag(LoopbackServer):
    """A registry whose one tag, base:v1, points at the manifest `body`, which a test moves (its digest
    header is the body's own sha256: envbuild refuses one that is not); `asked` counts the manifest
    requests."""

    def __init__(self) -> None:
        self.body = b'{"schemaVersion": 2, "v": 1}'
        self.asked = 0
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                if self.path == "/v2/base/manifests/v1":
                    outer.asked += 1
                    self.reply(200, outer.body, digest=outer.digest)
                else:
                    self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN"}]}')

            do_HEAD = do_GET

        super().__init__(Handler)

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.body).hexdigest()


def test_a_moved_base_tag_keeps_its_locked_digest_until_upgrade(capsys, tmp_path: Path, indexes) -> None:
    """The base tag is resolved when something relocks; a tag that moved in its registry is not a
    change of the spec, so the lock keeps its digest, without asking the registry, until --upgrade."""
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    lock = tmp_path / "envbuild.lock"
    with MovingTag() as registry:
        base = f"{registry.host}/base:v1"
        code, _, err = run_lock(capsys, tmp_path, "--base-image", base)
        assert code == 0, err
        first = registry.digest
        assert read_lock(str(lock)).lock.targets[0].base_image == f"{base}@{first}"
        asked, registry.body = registry.asked, b'{"schemaVersion": 2, "v": 2}'
        code, out, err = run_lock(capsys, tmp_path, "--base-image", base)
        assert code == 0 and "up to date" in out, err
        assert read_lock(str(lock)).lock.targets[0].base_image == f"{base}@{first}"
        assert registry.asked == asked
        code, out, err = run_lock(capsys, tmp_path, "--base-image", base, "--upgrade")
        assert code == 0, err
        assert f"wrote {lock}" in out
        assert registry.digest != first
        assert read_lock(str(lock)).lock.targets[0].base_image == f"{base}@{registry.digest}"


def test_a_lock_written_by_another_envbuild_version_relocks(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same spec, same matrix, sealed: but another envbuild wrote it, and this one may write it
    differently, so it is not "nothing changed"."""
    lock = project / "envbuild.lock"
    old = read_lock(str(lock)).lock.replace(envbuild="0.0.1")
    lock.write_text(forge(old))
    os.utime(lock, ns=(PAST, PAST))
    before = lock.read_bytes()
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, _ = run_lock(capsys, project, "--base-image", BASE)
    assert code == 1 and "up to date" not in out
    assert _unchanged(lock, before)
    assert __version__ != "0.0.1"


def test_with_a_key_only_a_lock_it_signed_is_up_to_date(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = write_key(tmp_path)
    lock = project / "envbuild.lock"
    code, out, err = run_lock(capsys, project, "--base-image", BASE, "--lock-key-file", str(key))
    assert code == 0, err
    assert f"wrote {lock}" in out and "content-hmac = " in lock.read_text()  # unsigned: relocked, signed
    os.utime(lock, ns=(PAST, PAST))
    signed = lock.read_bytes()
    other = tmp_path / "other.key"
    other.write_text("o" * 40)
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, err = run_lock(capsys, project, "--lock-key-file", str(key))
        assert code == 0, err
        assert "up to date" in out and _unchanged(lock, signed)
        code, out, _ = run_lock(capsys, project, "--lock-key-file", str(other))  # signed with another key
        assert code == 1 and "up to date" not in out and _unchanged(lock, signed)
        current = read_lock(str(lock)).lock
        (target,) = current.targets
        first, *rest = target.packages
        edited = target.replace(packages=(first.replace(hashes=("sha256:" + "0" * 64,)), *rest))
        lock.write_text(forge(current.replace(targets=(edited,)), keep_hmac_from=signed.decode()))
        os.utime(lock, ns=(PAST, PAST))
        resealed = lock.read_bytes()
        code, out, _ = run_lock(capsys, project, "--lock-key-file", str(key))  # digest recomputed, HMAC kept
        assert code == 1 and "up to date" not in out and _unchanged(lock, resealed)


def test_an_unknown_target_is_still_a_usage_error(
    capsys, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = project / "envbuild.lock"
    before = lock.read_bytes()
    with no_network(monkeypatch, tmp_path / "uv-cache"):
        code, out, err = run_lock(capsys, project, "--target", "nope")
    assert code == 2 and "nope" in err and "up to date" not in out
    assert _unchanged(lock, before)
