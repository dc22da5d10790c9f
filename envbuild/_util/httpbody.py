"""Reading an HTTP answer's body within a byte limit and one deadline for the whole request.

`response.content` reads whatever a server sends: a 1.5 GiB manifest exhausted memory. And requests'
timeout is per read, so a server that sends one byte every 20 s kept `audit` waiting for ever, and an
endless conda repodata.json left a 16.7 GB cache file behind (issue 33). Every body envbuild reads
goes through here instead: streamed in chunks, counted, stopped at its Limit (a Content-Length over
the limit is refused before a byte is read), stopped when the request's deadline has passed, and,
when it goes to a file, written beside the target and renamed only once it is whole, so a failure
leaves nothing behind.
"""

from __future__ import annotations

import os
import time

from envbuild._util import limits
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TypeVar

    T = TypeVar("T")

    import requests

CHUNK = 1 << 16


def _url(response: requests.Response) -> str:
    return redact(str(response.url or "the request").split("?", 1)[0])


def _cap(limit: limits.Limit | int) -> int:
    return limit.get() if isinstance(limit, limits.Limit) else int(limit)


def _pieces(response: requests.Response, decode: bool) -> Iterator[bytes]:
    """The body as it arrives: urllib3's read1 hands back what the socket has (at most CHUNK), where
    iter_content's read(CHUNK) waits for CHUNK bytes, so a server sending one byte every 0.2 s of a
    body with a Content-Length was never looked at against the deadline. Content-Encoding is decoded
    when `decode` (a registry blob is hashed as stored: not decoded)."""
    read1 = getattr(response.raw, "read1", None)
    if read1 is None:  # urllib3 1.x, or a raw that is not urllib3's
        yield from (
            response.iter_content(CHUNK) if decode else response.raw.stream(CHUNK, decode_content=False)
        )
        return
    while True:
        piece = read1(CHUNK, decode_content=decode)
        if not piece:
            return
        yield piece


def answered(send: Callable[[], T], *, url: str, started: float | None = None) -> T:
    """`send()`, a request whose answer's status line and headers it waits for, given at most what is
    left of the request's HTTP_DEADLINE_S (counted from `started`, default now).

    The body's deadline (chunks) starts once the headers are in; before that, requests' timeout is
    per read too, so a server that trickles its headers a byte at a time held the command as long as
    it liked. The wait runs in a daemon thread: past the deadline the command goes on with a clear
    error, and the abandoned request ends at its own next read timeout, or with the process."""
    import threading

    allowed = limits.HTTP_DEADLINE_S.get()
    left = (time.monotonic() if started is None else started) + allowed - time.monotonic()
    shown = redact(url.split("?", 1)[0])
    late = EnvbuildError(
        f"{shown}: the server's answer did not begin within {allowed} s",
        fix="the server is too slow or stalls on purpose; try again, use a mirror, or raise "
        f"{limits.HTTP_DEADLINE_S.env} for a slow link",
    )
    if left <= 0:
        raise late
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, send()))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="envbuild-http-answer", daemon=True)
    thread.start()
    thread.join(left)
    if not outcome:
        raise late
    ok, value = outcome[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]


def too_large(response: requests.Response, what: str, cap: int, limit: limits.Limit | int) -> EnvbuildError:
    env = limit.env if isinstance(limit, limits.Limit) else None
    return EnvbuildError(
        f"{_url(response)}: {what} is larger than envbuild reads ({limits.size(cap)})",
        fix="the server sent more than any genuine "
        + what
        + " holds; check the URL and the server"
        + (f", or raise {env} if this one really is that large" if env else ""),
    )


def chunks(
    response: requests.Response,
    *,
    what: str,
    limit: limits.Limit | int,
    started: float | None = None,
    decode: bool = True,
    seconds: float | None = None,
) -> Iterator[bytes]:
    """The body in chunks, stopped past `limit` bytes or once HTTP_DEADLINE_S has passed since
    `started` (time.monotonic(); default: now). The response is closed however it ends. `decode`:
    undo a Content-Encoding (gzip, deflate), as requests does; False gives the bytes as sent.
    `seconds`: the request's deadline when it is not HTTP_DEADLINE_S (a layer's grows with its size)."""
    cap = _cap(limit)
    allowed = limits.HTTP_DEADLINE_S.get() if seconds is None else seconds
    deadline = (time.monotonic() if started is None else started) + allowed
    try:
        declared = response.headers.get("Content-Length", "")
        if declared.strip().isdigit() and int(declared) > cap:
            raise too_large(response, what, cap, limit)
        import requests
        import urllib3

        count = 0
        try:
            for chunk in _pieces(response, decode):
                count += len(chunk)
                if count > cap:
                    raise too_large(response, what, cap, limit)
                if time.monotonic() > deadline:
                    raise EnvbuildError(
                        f"{_url(response)}: {what} did not arrive within {allowed:g} s "
                        f"({limits.size(count)} came)",
                        fix="the server is too slow or stalls on purpose; try again, use a mirror, or "
                        f"raise {limits.HTTP_DEADLINE_S.env} for a slow link",
                    )
                yield chunk
        except (
            requests.exceptions.ConnectionError,
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError,
            urllib3.exceptions.HTTPError,  # read1 raises urllib3's own: ProtocolError, ReadTimeoutError
            OSError,
        ) as exc:
            raise EnvbuildError(
                f"{_url(response)}: the connection broke while {what} came ({limits.size(count)} came): "
                f"{type(exc).__name__}",
                fix="try again; if it keeps happening, check the network or the server",
            ) from None
    finally:
        response.close()


def read(
    response: requests.Response, *, what: str, limit: limits.Limit | int, started: float | None = None
) -> bytes:
    """The whole body, within `limit` bytes and the request's deadline (see chunks)."""
    return b"".join(chunks(response, what=what, limit=limit, started=started))


def save(
    response: requests.Response,
    path: str,
    *,
    what: str,
    limit: limits.Limit | int = limits.DOWNLOAD_BYTES,
    started: float | None = None,
) -> int:
    """Write the body to `path` (beside it first, renamed when whole); returns the byte count.
    Whatever stops it, over the limit, past the deadline, a broken connection or an interrupt,
    removes the partial file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    count = 0
    try:
        with open(partial, "wb") as handle:
            for chunk in chunks(response, what=what, limit=limit, started=started):
                handle.write(chunk)
                count += len(chunk)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    return count
