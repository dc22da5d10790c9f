"""Whole-file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import hashlib
import os


def write_atomic(path: str, data: str | bytes) -> None:
    """Write next to the target, then rename over it (atomic on POSIX within a filesystem)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def file_sha256(path: str) -> str:
    """ "sha256:<hex>" of a file's bytes, read in 1 MiB chunks (wheels and locks alike)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


class NotReadable(Exception):
    """A named file that is not a regular file, or is larger than its limit: the caller turns it
    into an error naming its flag or field (the reason is in str())."""


def read_regular(path: str, *, limit: int) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit` bytes.

    `/dev/zero`, a FIFO or a terminal given as a matrix file or a log was read until memory ran out,
    or for ever (issue 33). The file is opened without blocking (a FIFO with no writer would wait)
    and judged by fstat on the open descriptor, so a path swapped after the check cannot slip past;
    at most limit + 1 bytes are read, so a file that grows while it is read is caught too.
    OSError (missing, unreadable) is left to the caller, which already reports those."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else "a device"
                if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket"
                if stat.S_ISSOCK(info.st_mode)
                else "not a regular file"
            )
            raise NotReadable(f"{kind}, not a regular file")
        if info.st_size > limit:
            from envbuild._util.limits import size

            raise NotReadable(f"{size(info.st_size)}, more than the {size(limit)} envbuild reads")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        parts, count = [], 0
        while count <= limit:
            part = os.read(fd, min(1 << 20, limit + 1 - count))
            if not part:
                break
            parts.append(part)
            count += len(part)
        if count > limit:
            from envbuild._util.limits import size

            raise NotReadable(f"more than the {size(limit)} envbuild reads (it grew while read)")
        return b"".join(parts)
    finally:
        os.close(fd)
