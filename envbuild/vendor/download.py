"""One file into the bundle, resumable and checked: a file already there with the right sha256 is
kept; otherwise it is streamed to `<name>.part`, hashed as it comes, and renamed into place only when
its sha256 is the one expected. A mismatch removes the .part and fails naming the file and the URL.

Progress is by bytes: each file's line says what came (or that it was there), with the run's total.
"""

from __future__ import annotations

import hashlib
import os
import time

from envbuild._util import httpbody, limits
from envbuild._util.progress import SILENT, Progress
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from envbuild.vendor.session import Session

CHUNK = 1 << 20


class Tally:
    """What a run did: files fetched and bytes, files already there and bytes."""

    def __init__(self, progress: Progress = SILENT) -> None:
        self.progress = progress
        self.fetched = 0
        self.fetched_bytes = 0
        self.kept = 0
        self.kept_bytes = 0

    @property
    def total_bytes(self) -> int:
        return self.fetched_bytes + self.kept_bytes


def sha256_of(path: str) -> str:
    """hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def intact(path: str, sha256: str | frozenset[str]) -> bool:
    """Whether `path` is a regular file (not a link) whose sha256 is `sha256` (hex; or one of a set)."""
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    accepted = frozenset((sha256,)) if isinstance(sha256, str) else sha256
    try:
        return sha256_of(path) in accepted
    except OSError:
        return False


def mismatch(label: str, url: str, expected: str, actual: str) -> EnvbuildError:
    return EnvbuildError(
        f"{label}: {redact(url)} sent a file whose sha256 is {actual}, and the lock (or the index) pins "
        f"{expected}: nothing was kept",
        fix="the index, a mirror or a proxy altered it; check the source (the spec's [mirrors]), then run "
        "`envbuild vendor` again",
    )


def store(
    path: str,
    sha256: str | frozenset[str],
    pieces: Callable[[], Iterator[bytes]],
    *,
    label: str,
    source: str,
    tally: Tally,
) -> int:
    """Make `path` hold the bytes whose sha256 is `sha256` (hex, or one of a set: a page that states
    no hash, checked against the lock's): kept when already there, else written from `pieces()`
    through `path.part`; returns the file's size."""
    accepted = frozenset((sha256,)) if isinstance(sha256, str) else sha256
    name = os.path.basename(path)
    if intact(path, accepted):
        size = os.path.getsize(path)
        tally.kept += 1
        tally.kept_bytes += size
        tally.progress.begin(label, f"checking {name}").done(f"already there, {limits.size(size)}")
        return size
    step = tally.progress.begin(label, f"fetching {name}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.part"
    digest = hashlib.sha256()
    size = 0
    try:
        with open(partial, "wb") as handle:
            for chunk in pieces():
                digest.update(chunk)
                handle.write(chunk)
                size += len(chunk)
        if digest.hexdigest() not in accepted:
            raise mismatch(label, source, " or ".join(sorted(accepted)), digest.hexdigest())
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    tally.fetched += 1
    tally.fetched_bytes += size
    step.done(f"fetched {limits.size(size)}; {limits.size(tally.total_bytes)} in the bundle so far")
    return size


def url_pieces(session: Session, url: str, *, what: str) -> Callable[[], Iterator[bytes]]:
    """The body of GET `url`, in chunks within DOWNLOAD_BYTES and the HTTP deadline."""

    def pieces() -> Iterator[bytes]:
        started = time.monotonic()
        response = session.get(url)
        if response.status_code != 200:
            response.close()
            raise EnvbuildError(
                f"{what}: {redact(url)} answered HTTP {response.status_code}",
                fix="check the source and the spec's [mirrors]; run `envbuild vendor` again (what it "
                "fetched is kept)",
            )
        yield from httpbody.chunks(response, what=what, limit=limits.DOWNLOAD_BYTES, started=started)

    return pieces
