"""What an audit learns from one image layer, kept by the layer's digest so a rebuild reads only new ones.

An image rebuilt after a user package changed shares every layer but one or two with the image audited
before it: the base, the CUDA wheels and the framework are the same bytes, under the same diff ids.
The audit's facts about a layer depend on that layer alone (which shared objects it adds, with the
kernels cuobjdump lists of each, and which paths below it it deletes or replaces), so they are read
once per layer and the image's filesystem is composed from them with the whiteout rules
(envbuild.image.layers.overlay). Verdicts are never kept: the GPUs and the framework are judged
afresh on every audit.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit.kernels import Kernels, read_kernels
from envbuild.audit.tree import WORKERS, file_sizes
from envbuild.image.layers import overlay

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

PROGRESS_EVERY_S = 5.0  # a library count line at most this often while cuobjdump reads one layer


class LayerFacts(Record):
    """One layer's changes to the filesystem below it, and the kernels of the shared objects it adds."""

    __slots__ = ("deleted", "opaque", "replaced", "objects")
    deleted: frozenset[str]  # whiteouts: the path and everything under it
    opaque: frozenset[str]  # opaque directories: everything the layers below had under them
    replaced: frozenset[str]  # every other non-directory entry (a file, link or device at that path)
    objects: dict[str, Kernels]  # the ELF shared objects it adds, by path in the image


def compose(layers: Sequence[LayerFacts]) -> dict[str, Kernels]:
    """{path: kernels} of the shared objects the image's filesystem has, layers given bottom first."""
    found = overlay(
        (set(layer.deleted), set(layer.opaque), set(layer.replaced) | set(layer.objects), layer.objects)
        for layer in layers
    )
    return dict(sorted(found.items()))


def read_layer(
    *,
    deleted: set[str],
    opaque: set[str],
    replaced: set[str],
    added: dict[str, str],
    binary: str,
    say: Callable[[str], None] | None = None,
) -> LayerFacts:
    """The facts of a layer whose added shared objects are files on this machine (`added`: path in
    the image -> file to read), cuobjdump running WORKERS at a time."""
    paths = sorted(added)
    done = 0
    last = time.monotonic()

    def one(path: str) -> Kernels:
        nonlocal done, last
        kernels = read_kernels(added[path], binary)
        done += 1
        if say and time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            say(f"{done}/{len(paths)} libraries read")
        return kernels

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        listed = list(pool.map(one, paths))
    sizes = file_sizes([added[path] for path in paths])  # the duplicate CUDA libraries report adds them
    return LayerFacts(
        deleted=frozenset(deleted),
        opaque=frozenset(opaque),
        replaced=frozenset(replaced - set(added)),
        objects={
            path: found.replace(size=size) for path, found, size in zip(paths, listed, sizes, strict=True)
        },
    )


def size_of(files: dict[str, str]) -> int:
    """Bytes of the files (what a progress line says cuobjdump has to read)."""
    total = 0
    for path in set(files.values()):
        with contextlib.suppress(OSError):
            total += os.path.getsize(path)
    return total
