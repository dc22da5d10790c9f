"""Issue 33: a file named on the command line, or found in a matrix directory, that is not a regular
file of a sane size. `/dev/zero` given as a log or a matrix file was read until memory ran out, and a
FIFO with no writer hung the command for ever. Each is now exit 2 naming the flag or the file.

Every case runs the real CLI in a subprocess under an address-space limit (RLIMIT_AS, 1 GiB: the
bound in memory; the oversize file is a 4 GiB sparse file, which a whole read could not hold) with a
generous timeout as a hang guard only; nothing is asserted on elapsed time. The test's own directory
is checked afterwards: the refused command left nothing in it, and wrote no cache entry.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import MATRIX_DIR, REPO

IMAGE = "127.0.0.1:9/envbuild-test/hostile@sha256:" + "a" * 64  # a port nothing listens on
MEMORY = 1 << 30  # the address space each run may use: far below what reading /dev/zero takes
OVERSIZE = 4 << 30  # a sparse file bigger than MEMORY, over limits.FILE_BYTES (64 MiB)
HANG_GUARD_S = 120  # only so a regression fails instead of hanging the suite


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _hostile(kind: str, where: Path) -> Path:
    """A path of `kind` at `where`: a FIFO with no writer, /dev/zero (a link to it, so a matrix file
    can be one), a directory, or a sparse file over the size cap."""
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "dev-zero":
        where.symlink_to("/dev/zero")
    elif kind == "directory":
        where.mkdir()
    elif kind == "oversize":
        with open(where, "wb") as handle:
            handle.truncate(OVERSIZE)
    return where


@pytest.fixture
def hostile() -> Iterator[Callable[[str, Path], Path]]:
    """_hostile, each path it made removed afterwards (a 4 GiB sparse file is not left behind in
    pytest's kept temporary directories)."""
    made: list[Path] = []

    def make(kind: str, where: Path) -> Path:
        made.append(_hostile(kind, where))
        return made[-1]

    yield make
    for path in made:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


WHAT = {
    "fifo": "a FIFO, not a regular file",
    "dev-zero": "a device, not a regular file",
    "directory": "a directory, not a regular file",
    "oversize": "4 GiB, more than the 64 MiB envbuild reads",
}


def _run(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
        "ENVBUILD_CACHE_DIR": str(cache),
    }
    return subprocess.run(
        [sys.executable, "-m", "envbuild", *args],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_limit_memory,
        timeout=HANG_GUARD_S,
        check=False,
    )


def _refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert "MemoryError" not in done.stderr and "fix:" in done.stderr, done.stderr
    for text in named:
        assert text in done.stderr, done.stderr


def _left(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


KINDS = sorted(WHAT)


@pytest.mark.parametrize("kind", KINDS)
def test_verify_from_log_reads_only_a_regular_file(tmp_path: Path, hostile, kind: str) -> None:
    log = hostile(kind, tmp_path / "job.log")
    cache = tmp_path / "cache"
    before = _left(tmp_path)
    done = _run(["verify", IMAGE, "--from-log", str(log), "--smoke-device", "cpu"], cache)
    _refused(done, f"--from-log {log}", WHAT[kind])
    assert _left(tmp_path) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["gpus.toml", "frameworks/torch.toml"])
def test_a_matrix_file_must_be_a_regular_file(tmp_path: Path, hostile, kind: str, name: str) -> None:
    root = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, root)
    (root / name).unlink()
    bad = hostile(kind, root / name)
    cache = tmp_path / "cache"
    before = _left(tmp_path)
    for args in (["resolve", "--driver", "550", "--framework", "torch"], ["matrix", "check"]):
        done = _run([*args, "--matrix", str(root)], cache)
        _refused(done, f"matrix file {bad}", WHAT[kind])
    assert _left(tmp_path) == before  # and no cache entry for a matrix that was refused


@pytest.mark.parametrize("kind", KINDS)
def test_a_spec_must_be_a_regular_file(tmp_path: Path, hostile, kind: str) -> None:
    spec = hostile(kind, tmp_path / "envbuild.toml")
    before = _left(tmp_path)
    done = _run(["render", "-f", str(spec), "-o", str(tmp_path / "out")], tmp_path / "cache")
    _refused(done, f"spec file {spec}", WHAT[kind])
    assert _left(tmp_path) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("flag", ["--record", "--report"])
def test_attest_attach_reads_its_facts_file_before_any_request(
    tmp_path: Path, hostile, kind: str, flag: str
) -> None:
    """The registry named is one nothing listens on: the file is refused before it is asked."""
    facts = hostile(kind, tmp_path / "facts.json")
    before = _left(tmp_path)
    done = _run(["attest", IMAGE, "--attach", flag, str(facts)], tmp_path / "cache")
    _refused(done, f"{flag} {facts}", WHAT[kind])
    assert "unreachable" not in done.stderr
    assert _left(tmp_path) == before
