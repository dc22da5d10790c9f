"""What an audit learns from one image layer, kept by the layer's digest so a rebuild reads only new ones.

An image rebuilt after a user package changed shares every layer but one or two with the image audited
before it: the base, the CUDA wheels and the framework are the same bytes, under the same diff ids.
The audit's facts about a layer depend on that layer alone (which shared objects it adds, with the
kernels cuobjdump lists of each, and which paths below it it deletes or replaces), so they are read
once per layer and the image's filesystem is composed from them with the whiteout rules
(envbuild.image.layers.overlay). Verdicts are never kept: the GPUs and the framework are judged
afresh on every audit.

A layer also keeps its symbolic links (path -> target, as written): a shared object's name in one
layer may lead to a file another layer added (`libtorch_cuda.so -> /opt/blobs/kernels.bin`, or a
relative target through a directory link of a layer below). The loader loads that file under the
link's name, so compose() resolves every such link in the merged filesystem, as the kernel does, and
judges it by its target (audit.tree.judged_through), as the registry and directory audits do.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor

from envbuild._util import limits
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit.kernels import Kernels, read_kernels
from envbuild.audit.tree import WORKERS, file_sizes, is_shared_object_name, judged_through, resolve
from envbuild.image.layers import overlay

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    # read(path in the image, index of the layer whose file it is): that file's kernels, None when it
    # is no ELF regular file (the loader could not load it either)
    ReadTarget = Callable[[str, int], Kernels | None]

PROGRESS_EVERY_S = 5.0  # a library count line at most this often while cuobjdump reads one layer


class LayerFacts(Record):
    """One layer's changes to the filesystem below it, and the kernels of the shared objects it adds."""

    __slots__ = ("deleted", "opaque", "replaced", "objects", "links")
    deleted: frozenset[str]  # whiteouts: the path and everything under it
    opaque: frozenset[str]  # opaque directories: everything the layers below had under them
    replaced: frozenset[str]  # every other non-directory entry (a file, link or device at that path)
    # the ELF shared objects it adds, by path in the image (a link judged through a file of this
    # layer too, with that file's kernels)
    objects: dict[str, Kernels]
    links: dict[str, str]  # every symbolic link it adds: path in the image -> its target as written

    def __init__(
        self,
        *,
        deleted: frozenset[str],
        opaque: frozenset[str],
        replaced: frozenset[str],
        objects: dict[str, Kernels],
        links: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            deleted=deleted, opaque=opaque, replaced=replaced, objects=objects, links=dict(links or {})
        )


def unread_target(target: str) -> Kernels:
    """What a link to another layer's file is judged by when no reader can reach that file: not read,
    which the audit refuses as it refuses any library it could not read (with its --skip-audit fix)."""
    return Kernels(
        sass=(),
        ptx=(),
        unread=f"links across layers to /{target}, which this audit could not read from the Engine",
    )


def compose(layers: Sequence[LayerFacts], read: ReadTarget | None = None) -> dict[str, Kernels]:
    """{path: kernels} of the shared objects the image's filesystem has, layers given bottom first.
    A shared object's name that is a link there is judged by the file it resolves to in the merged
    filesystem (cross_links); `read` gives the kernels of a target that is no shared object of the
    image (None: unread_target)."""
    found = overlay(
        (set(layer.deleted), set(layer.opaque), set(layer.replaced) | set(layer.objects), layer.objects)
        for layer in layers
    )
    targets: dict[tuple[str, int], Kernels | None] = {}  # each file read once, however many link to it
    for link, judged in cross_links(layers).items():
        found.pop(link, None)
        if isinstance(judged, Kernels):
            found[link] = judged
        elif judged is not None:
            if judged in targets:  # a further name of a file already counted
                first = targets[judged]
                kernels = first.replace(size=0) if first is not None else None
            else:
                kernels = read(*judged) if read is not None else unread_target(judged[0])
                targets[judged] = kernels
            if kernels is not None:
                found[link] = kernels
    return dict(sorted(found.items()))


def reads_needed(layers: Sequence[LayerFacts]) -> list[tuple[str, int]]:
    """(target, layer index) of each file compose() needs `read` for: none for most images."""
    return sorted({judged for judged in cross_links(layers).values() if isinstance(judged, tuple)})


def cross_links(layers: Sequence[LayerFacts]) -> dict[str, Kernels | tuple[str, int] | None]:
    """For each shared object's name that is a link in the merged filesystem: the kernels to judge it
    by when they are known (its target is a shared object of the image, or a file of the link's own
    layer that was read with it), (target, index of the layer holding the file) when the file is still
    to be read, or None when it is not judged (a target of a name judged as itself, a loop, a dangling
    or whited-out target, a directory)."""
    merged = _Merged(layers)
    answer: dict[str, Kernels | tuple[str, int] | None] = {}
    names = {path for layer in layers for path in layer.links}
    for link in sorted(path for path in names if is_shared_object_name(posixpath.basename(path))):
        own = merged.find(link)
        if own is None or link not in layers[own].links:
            continue  # deleted, or replaced by a file or a directory above
        target = resolve(link, merged.readlink, absolute=True)
        index = merged.find(target) if target is not None else None
        if target is None or index is None or not judged_through(link, target):
            answer[link] = None
        elif (
            index == own
            and link in layers[own].objects
            and resolve(link, layers[own].links.get, absolute=True) == target
        ):
            answer[link] = layers[own].objects[link]  # read with its layer, from this very file
        elif target in layers[index].objects:  # judged under its own name too: its bytes counted once
            answer[link] = layers[index].objects[target].replace(size=0)
        else:
            answer[link] = (target, index)
    return answer


class _Merged:
    """The merged filesystem's non-directory entries, looked up path by path from the top layer down
    with the rules of envbuild.image.layers.overlay: no whole view of an image's paths is built."""

    def __init__(self, layers: Sequence[LayerFacts]) -> None:
        self.layers = layers
        self.directories: list[set[str] | None] = [None] * len(layers)

    def _directories(self, index: int) -> set[str]:
        """The directories layer `index` has: its opaque ones, and every parent of a path it names (a
        layer's own empty directory is not known, and hides nothing below it here)."""
        known = self.directories[index]
        if known is None:
            layer = self.layers[index]
            known = set(layer.opaque)
            for path in (*layer.replaced, *layer.objects, *layer.links, *layer.deleted, *layer.opaque):
                parent = posixpath.dirname(path)
                while parent and parent not in known:
                    known.add(parent)
                    parent = posixpath.dirname(parent)
            self.directories[index] = known
        return known

    def find(self, path: str) -> int | None:
        """The index of the layer whose non-directory entry at `path` the merged filesystem shows, or
        None (no such entry, a directory, or hidden by a whiteout, an opaque directory or a file above)."""
        parents = []
        parent = posixpath.dirname(path)
        while parent:
            parents.append(parent)
            parent = posixpath.dirname(parent)
        for index in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[index]
            if path in layer.replaced or path in layer.objects or path in layer.links:
                return index
            if path in layer.deleted or path in self._directories(index) or "" in layer.opaque:
                return None
            hidden = (layer.deleted, layer.opaque, layer.replaced, layer.objects)
            if any(above in paths for above in parents for paths in hidden):
                return None
        return None

    def readlink(self, path: str) -> str | None:
        index = self.find(path)
        return self.layers[index].links.get(path) if index is not None else None


def read_layer(
    *,
    deleted: set[str],
    opaque: set[str],
    replaced: set[str],
    added: dict[str, str],
    binary: str,
    links: dict[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> LayerFacts:
    """The facts of a layer whose added shared objects are files on this machine (`added`: path in
    the image -> file to read), cuobjdump running WORKERS at a time; `links`: its symbolic links."""
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
        links={path: target for path, target in (links or {}).items() if is_link_target(target)},
    )


MAX_PATH = limits.PATH_CHARACTERS.default  # one path or link target in the image (Linux's PATH_MAX)


def is_link_target(value: object) -> bool:
    """A target the kernel could follow: not empty (ENOENT), no NUL, at most PATH_MAX. Any other is no
    link any path resolves through, so it is not kept."""
    return isinstance(value, str) and 0 < len(value) <= MAX_PATH and "\0" not in value


def size_of(files: dict[str, str]) -> int:
    """Bytes of the files (what a progress line says cuobjdump has to read)."""
    total = 0
    for path in set(files.values()):
        with contextlib.suppress(OSError):
            total += os.path.getsize(path)
    return total
