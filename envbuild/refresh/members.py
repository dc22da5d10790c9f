"""Chosen members of a remote wheel, read by HTTP range requests: the libraries an arch audit needs.

A TensorFlow or torch wheel is hundreds of MB, and the kernels an audit reads sit in one or two
members of it. The zip central directory (read by envbuild.refresh.upstream.open_wheel) gives each
member's offset and compressed size, so one streamed range request per member fetches its local
header and data, which are inflated straight to a file: memory stays small whatever the member's
size, and nothing else of the wheel is read. A server without range support gets the whole wheel
once (open_wheel's fallback) and the members come out of that. Each range is read with
envbuild._util.httpbody, no more bytes than asked for and within HTTP_DEADLINE_S; a member is
inflated no further than the size the central directory gives it, and a member that fails half-way is
removed (issue 33).
"""

from __future__ import annotations

import os
import struct
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator

from envbuild._util import httpbody
from envbuild._util.record import Record
from envbuild.errors import EnvbuildError
from envbuild.refresh.upstream import Http, RemoteWheel, malformed, open_wheel

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # PK\3\4 ... name length, extra length
_CHUNK = 1024 * 1024


class MembersRead(Record):
    __slots__ = ("paths", "ranged", "bytes_read", "size")
    paths: tuple[str, ...]  # member names, written under the target directory at the same path
    ranged: bool  # False: the server sent the whole wheel
    bytes_read: int  # what this read transferred, central directory included
    size: int  # the wheel's size


def read_members(http: Http, url: str, wanted: Callable[[str], bool], directory: str) -> MembersRead:
    """Write the members of the wheel at `url` whose name `wanted` accepts under `directory`."""
    before = http.bytes_read
    opened: list[RemoteWheel] = []
    paths = tuple(each_member(http, url, wanted, directory, opened=opened))
    return MembersRead(
        paths=paths,
        ranged=opened[0].ranged,
        bytes_read=http.bytes_read - before,
        size=opened[0].size,
    )


def each_member(
    http: Http,
    url: str,
    wanted: Callable[[str], bool],
    directory: str,
    *,
    opened: list[RemoteWheel] | None = None,
) -> Iterator[str]:
    """The members `wanted` accepts, one at a time: each is written under `directory` (at its path in
    the wheel) before its name is yielded, so a caller that deletes it after use never holds more than
    one on disk (a cuDNN wheel unpacks to gigabytes). `opened` gets the RemoteWheel, for its size."""
    wheel = open_wheel(http, url)
    if opened is not None:
        opened.append(wheel)
    with wheel.archive as archive:
        chosen = [m for m in archive.infolist() if not m.is_dir() and wanted(m.filename)]
        for member in chosen:
            target = _target(directory, member.filename, url)
            try:
                if wheel.ranged:
                    _fetch_member(http, wheel, member, target)
                else:
                    with archive.open(member) as source, open(target, "wb") as sink:
                        while chunk := source.read(_CHUNK):
                            sink.write(chunk)
            except BaseException:  # a member cut short is not left behind
                if os.path.exists(target):
                    os.unlink(target)
                raise
            yield member.filename


def _target(directory: str, name: str, url: str) -> str:
    root = os.path.abspath(directory)
    path = os.path.abspath(os.path.join(root, name))
    if not path.startswith(root + os.sep):
        raise malformed(url, f"member {name!r} points outside the wheel")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _fetch_member(http: Http, wheel: RemoteWheel, member: zipfile.ZipInfo, target: str) -> None:
    """A streamed range request for the local header and data, inflated and CRC-checked. The request
    assumes the local extra field is as long as the central one (it is in wheels); when it is longer,
    a second request fetches the rest."""
    if member.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise malformed(wheel.url, f"member {member.filename} uses zip method {member.compress_type}")
    start = member.header_offset
    guess = _LOCAL_HEADER.size + len(member.filename.encode()) + len(member.extra) + member.compress_size
    chunks = _stream(http, wheel, start, min(wheel.size, start + guess) - 1)
    buffer = b""
    while len(buffer) < _LOCAL_HEADER.size and (chunk := next(chunks, b"")):
        buffer += chunk
    fields = _LOCAL_HEADER.unpack(buffer[: _LOCAL_HEADER.size]) if len(buffer) >= _LOCAL_HEADER.size else None
    if fields is None or fields[0] != b"PK\x03\x04":
        raise malformed(wheel.url, f"no local header for {member.filename} at offset {start}")
    data_start = start + _LOCAL_HEADER.size + fields[9] + fields[10]
    data_end = data_start + member.compress_size
    position = start + len(buffer)  # the absolute offset just after what `buffer` holds
    pending = buffer[data_start - start :] if position > data_start else b""
    skip = max(0, data_start - position)
    inflate = zlib.decompressobj(-15) if member.compress_type == zipfile.ZIP_DEFLATED else None
    crc = written = 0
    with open(target, "wb") as sink:
        while True:
            pending = pending[: max(0, data_end - (position - len(pending)))] if pending else pending
            if pending:
                # no further than the member's own size (+1 to see a lie): an inflate bomb stops here
                out = inflate.decompress(pending, member.file_size + 1 - written) if inflate else pending
                crc, written = zlib.crc32(out, crc), written + len(out)
                if written > member.file_size:
                    break
                sink.write(out)
            if position >= data_end:
                break
            chunk = next(chunks, b"")
            if not chunk:  # the local extra field was longer than the central one: fetch the rest
                chunks = _stream(http, wheel, position, data_end - 1)
                chunk = next(chunks, b"")
                if not chunk:
                    break
            position += len(chunk)
            dropped = min(skip, len(chunk))
            pending, skip = chunk[dropped:], skip - dropped
        if inflate is not None and written <= member.file_size:
            tail = inflate.flush()
            crc, written = zlib.crc32(tail, crc), written + len(tail)
            sink.write(tail)
    if crc != member.CRC or written != member.file_size:
        raise malformed(
            wheel.url,
            f"member {member.filename} came back damaged ({written} of {member.file_size} bytes, "
            f"CRC {'ok' if crc == member.CRC else 'wrong'})",
        )


def _stream(http: Http, wheel: RemoteWheel, start: int, stop: int) -> Iterator[bytes]:
    """The bytes start..stop (inclusive) of the wheel, chunk by chunk, counted as they arrive: no
    more than the range holds, within the request's deadline (httpbody.chunks)."""
    started = time.monotonic()
    response = http.get(wheel.url, headers={"Range": f"bytes={start}-{stop}"}, stream=True)
    if response.status_code != 206:
        response.close()
        raise EnvbuildError(
            f"{wheel.url} stopped honouring range requests (HTTP {response.status_code} "
            f"for bytes {start}-{stop})",
            fix="retry later; nothing was written",
        )
    asked = stop - start + 1
    for chunk in httpbody.chunks(response, what=f"bytes {start}-{stop}", limit=asked, started=started):
        http.bytes_read += len(chunk)
        yield chunk
