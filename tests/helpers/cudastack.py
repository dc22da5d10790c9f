"""The real CUDA stack the end-to-end image test builds: torch 2.6.0's PyPI build (cu124) with every
wheel it pulls in, pinned with hashes in tests/fixtures/cuda (see the file's header).

.ci/run downloads it once per machine under a directory named by the list's sha256, so editing the
list is a new download; a developer's `make test` without it downloads it into the run's shared
temporary directory (about 2.9 GB, 20 s on the machines here).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO

PINNED = REPO / "tests" / "fixtures" / "cuda" / "torch-2.6.0-cu124-cp311.txt"
VARIABLE = "ENVBUILD_TEST_CUDA_WHEELHOUSE"  # the directory .ci/run fills
LOCK_VARIABLE = "ENVBUILD_TEST_CUDA_WHEELHOUSE_LOCK"  # .ci/run: held while it downloads into it
PLATFORMS = ("manylinux1_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
_LINE = re.compile(r"^(?P<name>[a-z0-9-]+)==(?P<version>\S+) --hash=sha256:(?P<sha256>[0-9a-f]{64})$")


def pinned() -> dict[str, tuple[str, str]]:
    """{canonical name: (version, sha256)} of the pinned list."""
    found: dict[str, tuple[str, str]] = {}
    for line in PINNED.read_text().splitlines():
        if line and not line.startswith("#"):
            match = _LINE.match(line)
            assert match, f"{PINNED}: not `name==version --hash=sha256:HEX`: {line!r}"
            found[match.group("name")] = (match.group("version"), match.group("sha256"))
    return found


def wait_for_ci_download() -> None:
    """Block while .ci/run's background download into VARIABLE's directory runs: the job holds an flock
    on the file LOCK_VARIABLE names from before it starts until it ends, however it ends, so taking
    the lock here is the wait (no clock, no polling). Without the variable, no job runs."""
    lock = os.environ.get(LOCK_VARIABLE)
    if lock and os.path.exists(lock):
        with open(lock) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)


def key() -> str:
    """The cache key .ci/run names the download by: the first 16 hex digits of the list's sha256."""
    return hashlib.sha256(PINNED.read_bytes()).hexdigest()[:16]


def _canonical(filename: str) -> str:
    return re.sub(r"[-_.]+", "-", filename.split("-")[0]).lower()


def complete(directory: Path) -> bool:
    """Whether `directory` holds a wheel of every pinned name and version (the hashes are checked where
    it matters: the image installs with --require-hashes)."""
    have = {(_canonical(p.name), p.name.split("-")[1]) for p in directory.glob("*.whl")}
    return all((name, version) in have for name, (version, _) in pinned().items())


def download(directory: Path) -> Path:
    """`pip download` the pinned list into `directory`, hash-checked, for CPython 3.11 on x86_64."""
    tags = [flag for tag in PLATFORMS for flag in ("--platform", tag)]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes"]
    target = ["--python-version", "3.11", "--only-binary=:all:", *tags]
    subprocess.run([*pip, "-r", str(PINNED), *target, "-d", str(directory)], check=True)
    return directory
