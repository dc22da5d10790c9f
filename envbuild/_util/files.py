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
