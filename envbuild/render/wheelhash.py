"""The sha256 of a wheelhouse's wheel, kept by the file's identity, so a rebuild does not read the
same gigabytes again to check them against envbuild.lock (render.wheelgap).

Hashing torch 2.6.0's CUDA wheelhouse (2.9 GB, 24 wheels) took 3 to 10 s on the 2-core CI box,
depending on its load: on every build, in front of a warm rebuild that itself takes 9 s. A wheel's
bytes do not change while its file stays the same, so the digest is kept under envbuild's cache
directory (`ENVBUILD_CACHE_DIR`; empty turns it off) in `wheel-sha256/`, one small file per wheel,
keyed by its real path, device, inode, size and modification time. The inode's change time is not in
the key: each render hard-links the wheels into its context, which changes it every time.

This check is for the user's sake, to say what is wrong before a build starts; the gate is uv's
`--require-hashes` inside the build, which reads every byte. So a file rewritten with its old size
and modification time put back (which needs write access to the wheelhouse) is caught there, not
here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re

from envbuild._util.files import file_sha256, write_atomic

FORMAT = 1
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _entry(path: str) -> str | None:
    """The cache file for `path` as it is now, or None when caching is off or it cannot be stat'ed."""
    from envbuild.matrix.load import cache_dir

    root = cache_dir()
    if root is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    identity = f"{FORMAT}\n{os.path.realpath(path)}\n{found.st_dev}\n{found.st_ino}\n{found.st_size}"
    identity += f"\n{found.st_mtime_ns}"
    return os.path.join(root, "wheel-sha256", hashlib.sha256(identity.encode()).hexdigest())


def wheel_sha256(path: str) -> str:
    """ "sha256:<hex>" of the file at `path`, from the cache when the same file was hashed before."""
    entry = _entry(path)
    if entry is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            with open(entry, encoding="ascii") as handle:
                kept = handle.read(100).strip()
            if _DIGEST.match(kept):
                return kept
    digest = file_sha256(path)
    if entry is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs the next read
            write_atomic(entry, digest + "\n")
    return digest
