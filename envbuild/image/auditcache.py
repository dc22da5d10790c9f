"""What an audit read from each image layer, kept by the layer's digest, so the same layer is not read
again: neither by the next audit of the same image nor by the audit of a rebuilt one.

`envbuild build` audits every image it builds, and `envbuild verify` audits again before the smoke
step. A rebuild after one user package changed shares every layer but the last with the image before
it; reading those again (a `docker save` of gigabytes, then cuobjdump over every library) took 50 s of
a 60 s audit of a real torch CUDA image. The facts kept here depend on one layer's bytes alone
(envbuild.image.layerfacts.LayerFacts: what it deletes and replaces, and the kernels of the shared
objects it adds), so an image is composed from the entries of its layers, and only a layer without
one is read.

- **What is kept:** facts about bytes, not verdicts (each shared object's SASS and PTX, and the bytes
  it adds, which the duplicate CUDA libraries report adds up): the GPUs, the framework and the gate's
  rule are judged afresh on every audit.
- **The key:** the layer's diff id (sha256 of the uncompressed layer, which the Engine computed from
  the content when it stored the layer), the sha256 of the cuobjdump binary, and FORMAT. Another
  cuobjdump, or a change in how envbuild reads (bump FORMAT), reads afresh.
- **Only through the local Engine.** A registry's image config could claim the diff ids of layers it
  does not serve (the registry reader checks each blob against the manifest's compressed digest, not
  against the config), so a read from a registry is never answered from here.
- **Bounds:** an entry over MAX_BYTES, or one that is not JSON of the shape written, is a miss: the
  layer is read afresh and the entry replaced. Writes are atomic. It lives under envbuild's cache
  directory (`ENVBUILD_CACHE_DIR`; empty turns it off, as it does for the matrix cache).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re

from envbuild._util import limits
from envbuild._util.files import NotReadable, read_regular, write_atomic
from envbuild._util.jsontext import parse_json
from envbuild.audit.kernels import Kernels
from envbuild.image.layerfacts import MAX_PATH, LayerFacts, is_link_target

FORMAT = (  # bump when what is kept, or how it is read, changes (2: why a read stopped; 3: bytes;
    6  # 4: per layer; 5: a shared object's name linked to a file of another name is judged by it;
)  # 6: every symbolic link, so a link to another layer's file is judged by it)
MAX_UNREAD = 1000  # the reason a read stopped: kernels.py bounds cuobjdump's line to 300 characters
MAX_BYTES = 32 << 20  # torch's layer: about 20,000 paths and 200 shared objects, under 3 MiB
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


def _path(diff_id: str, binary: str) -> str | None:
    """The entry's file for this layer and this cuobjdump, or None (no cache, or a layer digest that
    is not a sha256 diff id: nothing to key on)."""
    root = directory()
    if root is None or not (isinstance(diff_id, str) and _DIFF_ID.match(diff_id)):
        return None
    key = hashlib.sha256(f"{FORMAT}\n{_binary_digest(binary)}\n{diff_id}".encode()).hexdigest()
    return os.path.join(root, f"{key}.json")


def load_layer(diff_id: str, binary: str) -> LayerFacts | None:
    """The facts kept for exactly this layer and this cuobjdump, or None (a miss)."""
    path = _path(diff_id, binary)
    if path is None:
        return None
    try:  # a FIFO planted as an entry would block open(): read_regular opens without waiting
        data = read_regular(path, limit=MAX_BYTES)
    except (OSError, NotReadable):
        return None
    try:
        entry = parse_json(data)
    except ValueError:
        return None
    return _facts(entry, diff_id)


def _paths(value: object) -> frozenset[str] | None:
    if not isinstance(value, list) or not all(_is_path(item) for item in value):
        return None
    return frozenset(value)


def _is_path(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_PATH and "\0" not in value


def _facts(entry: object, diff_id: str) -> LayerFacts | None:
    """The entry's facts if it is what `store_layer` wrote for this layer, else None."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("layer") != diff_id:
        return None
    deleted, opaque, replaced = (_paths(entry.get(name)) for name in ("deleted", "opaque", "replaced"))
    objects, links = entry.get("objects"), entry.get("links")
    if deleted is None or opaque is None or replaced is None or not isinstance(objects, list):
        return None
    if not isinstance(links, list) or len(links) > limits.ARCHIVE_ENTRIES.get():
        return None
    if not all(
        isinstance(item, list) and len(item) == 2 and _is_path(item[0]) and is_link_target(item[1])
        for item in links
    ):
        return None
    found: dict[str, Kernels] = {}
    for item in objects:
        if not (isinstance(item, list) and len(item) == 5):
            return None
        path, sass, ptx, unread, size = item
        if not (_is_path(path) and isinstance(sass, list) and isinstance(ptx, list)):
            return None
        if not all(isinstance(arch, str) and _ENTRY.match(arch) for arch in (*sass, *ptx)):
            return None
        if not (unread is None or (isinstance(unread, str) and 0 < len(unread) <= MAX_UNREAD)):
            return None
        if not (size is None or (type(size) is int and size >= 0)):
            return None
        found[path] = Kernels(sass=tuple(sass), ptx=tuple(ptx), unread=unread, size=size)
    return LayerFacts(deleted=deleted, opaque=opaque, replaced=replaced, objects=found, links=dict(links))


def store_layer(diff_id: str, binary: str, facts: LayerFacts) -> None:
    """Keep `facts` for this layer and this cuobjdump; a cache that cannot be written is skipped (the
    audit's answer does not depend on it)."""
    path = _path(diff_id, binary)
    if path is None:
        return
    objects = [[name, list(k.sass), list(k.ptx), k.unread, k.size] for name, k in facts.objects.items()]
    entry = {
        "format": FORMAT,
        "layer": diff_id,
        "deleted": sorted(facts.deleted),
        "opaque": sorted(facts.opaque),
        "replaced": sorted(facts.replaced),
        "objects": objects,
        "links": [[path, target] for path, target in sorted(facts.links.items())],
    }
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps(entry, separators=(",", ":")))
