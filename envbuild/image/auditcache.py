"""What an audit read from an image's layers, kept by the layers' digests, so the same layers are not
exported and read again.

`envbuild build` audits every image it builds, and `envbuild verify` audits again before the smoke
step. Rebuilding an unchanged spec, verifying what was just built, or building targets that differ
only in labels asks the Engine to `docker save` the same gigabytes once more: about 8 s for a 1.2 GB
torch CPU image on a 2-core machine, every time. The facts that audit reads depend on the layers
alone, so they are kept here under the image's ordered layer digests.

- **What is kept:** every ELF shared object the image's filesystem has (its layers applied, whiteouts
  included) with the SASS and PTX entries cuobjdump listed for it, and the bytes it adds (the
  duplicate CUDA libraries report adds them up). These are facts about bytes, not
  verdicts: the GPUs, the framework and the gate's rule are judged afresh on every audit.
- **The key:** the ordered diff ids (sha256 of each uncompressed layer, which the Engine computed
  from the content when it stored the layer), the sha256 of the cuobjdump binary, and FORMAT. Another
  cuobjdump, or a change in how envbuild reads (bump FORMAT), reads afresh.
- **Only through the local Engine.** A registry's image config could claim the diff ids of layers it
  does not serve (the registry reader checks each blob against the manifest's compressed digest, not
  against the config), so a read from a registry is never answered from here.
- **Bounds:** an entry over MAX_BYTES, or one that is not JSON of the shape written, is a miss: the
  image is read afresh and the entry replaced. Writes are atomic. It lives under envbuild's cache
  directory (`ENVBUILD_CACHE_DIR`; empty turns it off, as it does for the matrix cache).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re

from envbuild._util.files import write_atomic
from envbuild._util.record import TYPE_CHECKING
from envbuild.audit.kernels import Kernels

if TYPE_CHECKING:
    from collections.abc import Sequence

FORMAT = 3  # bump when what is kept, or how it is read, changes (2: why a read stopped; 3: bytes)
MAX_UNREAD = 1000  # the reason a read stopped: kernels.py bounds cuobjdump's line to 300 characters
MAX_BYTES = 32 << 20  # a CUDA image's few thousand shared objects take well under 1 MiB
_DIFF_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
_ENTRY = re.compile(r"^(sm|compute)_\d{2,4}[af]?$")
_binary_digests: dict[str, str] = {}


def directory() -> str | None:
    """audit/ under envbuild's cache directory, or None when caching is off."""
    from envbuild.matrix.load import cache_dir

    root = cache_dir()
    return os.path.join(root, "audit") if root else None


def _binary_digest(binary: str) -> str:
    """sha256 of the cuobjdump binary (290 KB), once per process."""
    if binary not in _binary_digests:
        with open(binary, "rb") as handle:
            _binary_digests[binary] = hashlib.sha256(handle.read()).hexdigest()
    return _binary_digests[binary]


def _path(layers: Sequence[str], binary: str) -> str | None:
    """The entry's file for these layers and this cuobjdump, or None (no cache, or layer digests
    that are not sha256 diff ids: nothing to key on)."""
    root = directory()
    if root is None or not all(isinstance(layer, str) and _DIFF_ID.match(layer) for layer in layers):
        return None
    key = hashlib.sha256(f"{FORMAT}\n{_binary_digest(binary)}\n{chr(10).join(layers)}".encode()).hexdigest()
    return os.path.join(root, f"{key}.json")


def load(layers: Sequence[str], binary: str) -> dict[str, Kernels] | None:
    """{path: kernels} kept for exactly these layers and this cuobjdump, or None (a miss)."""
    path = _path(layers, binary)
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    try:
        entry = json.loads(data)
    except ValueError:
        return None
    return _kernels(entry, layers)


def _kernels(entry: object, layers: Sequence[str]) -> dict[str, Kernels] | None:
    """The entry's facts if it is what `store` wrote for these layers, else None."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("layers") != list(layers):
        return None
    objects = entry.get("objects")
    if not isinstance(objects, list):
        return None
    found: dict[str, Kernels] = {}
    for item in objects:
        if not (isinstance(item, list) and len(item) == 5):
            return None
        path, sass, ptx, unread, size = item
        if not (isinstance(path, str) and isinstance(sass, list) and isinstance(ptx, list)):
            return None
        if not all(isinstance(arch, str) and _ENTRY.match(arch) for arch in (*sass, *ptx)):
            return None
        if not (unread is None or (isinstance(unread, str) and 0 < len(unread) <= MAX_UNREAD)):
            return None
        if not (size is None or (type(size) is int and size >= 0)):
            return None
        found[path] = Kernels(sass=tuple(sass), ptx=tuple(ptx), unread=unread, size=size)
    return found


def store(layers: Sequence[str], binary: str, kernels: dict[str, Kernels]) -> None:
    """Keep `kernels` for these layers and this cuobjdump; a cache that cannot be written is skipped
    (the audit's answer does not depend on it)."""
    path = _path(layers, binary)
    if path is None:
        return
    objects = [
        [name, list(found.sass), list(found.ptx), found.unread, found.size] for name, found in kernels.items()
    ]
    entry = {"format": FORMAT, "layers": list(layers), "objects": objects}
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps(entry, separators=(",", ":")))
