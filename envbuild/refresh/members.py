"""Chosen members of a remote wheel, read by HTTP range requests: the libraries an arch audit needs.

A TensorFlow or torch wheel is hundreds of MB, and the kernels an audit reads sit in one or two
members of it. The zip central directory (read by envbuild.refresh.upstream.open_wheel) gives each
member's offset and compressed size, so one streamed range request per member fetches its local
header and data, which are inflated straight to a file: memory stays small whatever the member's
size, and nothing else of the wheel is read. A server without range support gets the whole wheel
once (open_wheel's fallback) and the members come out of that.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from collections.abc import Callable

from envbuild._util.record import Record
from envbuild.errors import EnvbuildError
from envbuild.refresh.upstream import Http, RemoteWheel, malformed, open_wheel

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # PK\3\4 ... name length, extra length
_LOCAL_SLACK = 64 * 1024  # a member's local extra field may be longer than its central one
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
    wheel = open_wheel(http, url)
    with wheel.archive as archive:
        chosen = [m for m in archive.infolist() if not m.is_dir() and wanted(m.filename)]
        for member in chosen:
            target = _target(directory, member.filename, url)
            if wheel.ranged:
                _fetch_member(http, wheel, member, target)
            else:
                with archive.open(member) as source, open(target, "wb") as sink:
                    while chunk := source.read(_CHUNK):
                        sink.write(chunk)
    return MembersRead(
        paths=tuple(m.filename for m in chosen),
        ranged=wheel.ranged,
        bytes_read=http.bytes_read - before,
        size=wheel.size,
    )


def _target(directory: str, name: str, url: str) -> str:
    root = os.path.abspath(directory)
    path = os.path.abspath(os.path.join(root, name))
    if not path.startswith(root + os.sep):
        raise malformed(url, f"member {name!r} points outside the wheel")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _fetch_member(http: Http, wheel: RemoteWheel, member: zipfile.ZipInfo, target: str) -> None:
    """One streamed range request: the local header, then the data, inflated and CRC-checked."""
    if member.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise malformed(wheel.url, f"member {member.filename} uses zip method {member.compress_type}")
    start = member.header_offset
    stop = min(wheel.size, start + _LOCAL_HEADER.size + len(member.filename.encode()) + _LOCAL_SLACK
               + member.compress_size) - 1  # fmt: skip
    response = http.get(wheel.url, headers={"Range": f"bytes={start}-{stop}"}, stream=True)
    if response.status_code != 206:
        raise EnvbuildError(
            f"{wheel.url} stopped honouring range requests (HTTP {response.status_code} "
            f"for bytes {start}-{stop})",
            fix="retry later; nothing was written",
        )
    stream = response.iter_content(_CHUNK)
    buffer = b""
    header_size = _LOCAL_HEADER.size
    for chunk in stream:
        buffer += chunk
        if len(buffer) >= header_size:
            break
    fields = _LOCAL_HEADER.unpack(buffer[:header_size]) if len(buffer) >= header_size else None
    if fields is None or fields[0] != b"PK\x03\x04":
        raise malformed(wheel.url, f"no local header for {member.filename} at offset {start}")
    skip = header_size + fields[9] + fields[10]
    remaining = member.compress_size
    inflate = zlib.decompressobj(-15) if member.compress_type == zipfile.ZIP_DEFLATED else None
    crc, written = 0, 0
    received = len(buffer)
    with open(target, "wb") as sink:
        pending = buffer
        while True:
            if skip:
                dropped = min(skip, len(pending))
                pending, skip = pending[dropped:], skip - dropped
            if pending and remaining:
                data, pending = pending[:remaining], b""
                remaining -= len(data)
                out = inflate.decompress(data) if inflate else data
                crc, written = zlib.crc32(out, crc), written + len(out)
                sink.write(out)
            if not remaining:
                break
            pending = next(stream, b"")
            if not pending:
                break
            received += len(pending)
        if inflate is not None:
            tail = inflate.flush()
            crc, written = zlib.crc32(tail, crc), written + len(tail)
            sink.write(tail)
    response.close()
    http.bytes_read += received
    if remaining or crc != member.CRC or written != member.file_size:
        raise malformed(
            wheel.url,
            f"member {member.filename} came back damaged ({written} of {member.file_size} bytes, "
            f"CRC {'ok' if crc == member.CRC else 'wrong'})",
        )
