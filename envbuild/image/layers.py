"""The files an image reader needs from its layer tarballs, as the image's filesystem has them.

`envbuild audit` reads the GPU kernels of an image without running it, so it rebuilds just the part
of the filesystem it needs: the ELF shared objects (the default). `Layers(scratch, keep=...)` keeps
the regular files whose path the predicate accepts instead (image.registry_inventory: dpkg's status,
Python distribution metadata, conda-meta records), so one whiteout implementation serves both.
Layers are applied bottom first, with the OCI whiteout rules, so a library a later layer deleted or
replaced is not audited:

- `DIR/.wh.NAME` deletes NAME (a file, or a directory and all under it) from the layers below;
- `DIR/.wh..wh..opq` (opaque directory) hides everything the layers below had in DIR;
- any other entry at a path replaces what the layers below had there (a symlink over a library, a
  file over a directory), and a library inside a path that became a file is gone too.

Whiteouts act on the layers below only, so each layer's changes are collected first and applied as a
whole. Layers may be read in any order (`docker save` writes manifest.json, which gives the order,
after the layers): `Layers.read` takes one tarball at a time and `Layers.extract` applies them in the
order given. Only the kept files' bytes are kept on disk (under a temporary directory); member
names are normalised inside the image's root (`/x.so` and `../x.so` are `x.so`), so no name can
write outside the directory the audit reads.
"""

from __future__ import annotations

import gzip
import os
import posixpath
import shutil
import tarfile
import zlib

from envbuild._util.record import TYPE_CHECKING
from envbuild.audit.tree import is_shared_object_name
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import IO, TypeVar

    T = TypeVar("T")

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_ELF = b"\x7fELF"
_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20


def layer_stream(stream: IO[bytes], key: str, where: str) -> tuple[IO[bytes], str]:
    """(what to read the tar from, tarfile's mode) for a layer blob. tarfile's own gzip reading ("r|*"
    or "r|gz") stops at the end of the first gzip member, while Docker, containerd and GNU tar read
    every member, and an eStargz layer is many members by design: a file in member 2 was invisible to
    the audit and the inventory (issue 33). So a gzip layer goes through gzip.GzipFile, which reads
    them all; a zstd one is refused by its magic, before any byte is taken for a tar."""
    head = stream.read(4)
    rejoined = Prefixed(head, stream)
    if head[:2] == _GZIP:
        return gzip.GzipFile(fileobj=rejoined, mode="rb"), "r|"  # type: ignore[arg-type]
    if head == _ZSTD:
        raise EnvbuildError(
            f"layer {key} of {where} is zstd-compressed, which envbuild cannot read",
            fix="push the image with gzip layers (the docker and buildx default)",
        )
    return rejoined, "r|*"  # type: ignore[return-value]


class Prefixed:
    """`head` (bytes already read to look at a blob) followed by the rest of `rest`."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head = head
        self.rest = rest

    def read(self, size: int = -1) -> bytes:
        if not self.head:
            return self.rest.read(size)
        if size is None or size < 0:
            data, self.head = self.head + self.rest.read(), b""
            return data
        data, self.head = self.head[:size], self.head[size:]
        return data if len(data) == size else data + self.rest.read(size - len(data))


def _clean(name: str) -> str | None:
    """ "./usr/lib/x.so" -> "usr/lib/x.so", "../x.so" -> "x.so"; None for the root itself."""
    path = posixpath.normpath("/" + name).lstrip("/")
    return path or None


class _Changes:
    """What one layer does to the paths below it: deletions (whiteouts and replacements) and the
    shared objects it adds (path -> the file holding its bytes)."""

    def __init__(self) -> None:
        self.deleted: set[str] = set()  # the path and everything under it
        self.opaque: set[str] = set()  # everything under the directory
        self.replaced: set[str] = set()  # non-directory entries: the path, and anything under it
        self.added: dict[str, str] = {}


class Layers:
    """Collects layers' changes under `scratch`, then gives the image's kept files.

    keep: which paths ("usr/lib/x.so", relative to the image's root) to keep the bytes of; None keeps
    the ELF shared objects (by name, then by their ELF magic), what the audit reads.
    """

    def __init__(self, scratch: str, keep: Callable[[str], bool] | None = None) -> None:
        self.scratch = scratch
        self.keep = keep
        self.store = os.path.join(scratch, "blobs")
        os.makedirs(self.store, exist_ok=True)
        self.changes: dict[str, _Changes] = {}
        self.count = 0

    def read(self, key: str, stream: IO[bytes], where: str) -> None:
        """Read one layer tarball (plain, gzip, bzip2 or xz) from `stream`, sequentially: a gzip layer
        to the end of its last member, as Docker, containerd and GNU tar read it (layer_stream)."""
        changes = _Changes()
        try:
            opened, mode = layer_stream(stream, key, where)
            with tarfile.open(fileobj=opened, mode=mode) as archive:  # type: ignore[call-overload]
                for member in archive:
                    self._member(archive, member, changes)
        except (tarfile.TarError, EOFError, ValueError, zlib.error, gzip.BadGzipFile) as exc:
            raise EnvbuildError(
                f"layer {key} of {where} is not a readable tar archive ({exc})",
                fix="check the image (docker image inspect); zstd layers are not supported, push with gzip",
            ) from None
        except OSError as exc:  # reading the stream raises EnvbuildError: this is the scratch disk
            raise EnvbuildError(
                f"could not keep the files of layer {key} under {self.scratch}: {exc}",
                fix="free space under the temporary directory, or point TMPDIR at a larger disk",
            ) from None
        self.changes[key] = changes

    def _member(self, archive: tarfile.TarFile, member: tarfile.TarInfo, changes: _Changes) -> None:
        path = _clean(member.name)
        if path is None:
            return
        parent, name = posixpath.split(path)
        if name == OPAQUE:
            changes.opaque.add(parent)
            return
        if name.startswith(WHITEOUT):
            changes.deleted.add(posixpath.join(parent, name[len(WHITEOUT) :]))
            return
        if member.isdir():
            return
        changes.replaced.add(path)
        wanted = is_shared_object_name(posixpath.basename(path)) if self.keep is None else self.keep(path)
        if not wanted:
            return
        if member.isfile():
            source = archive.extractfile(member)
            if source is None:
                return
            head = source.read(len(_ELF)) if self.keep is None else b""
            if self.keep is None and head != _ELF:
                return
            self.count += 1
            stored = os.path.join(self.store, str(self.count))
            with open(stored, "wb") as out:
                out.write(head)
                shutil.copyfileobj(source, out, _CHUNK)
            changes.added[path] = stored
        elif member.islnk():  # a hard link to a library earlier in the same layer
            target = _clean(member.linkname)
            if target in changes.added:
                changes.added[path] = changes.added[target]

    def extract(self, order: list[str], root: str) -> int:
        """Apply the layers named in `order` (bottom first) and write the surviving kept files under
        `root`; how many there are. A key that was never read is an error."""
        kept = self.survivors(order)
        for path, stored in sorted(kept.items()):
            destination = os.path.join(root, *path.split("/"))
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            if os.path.exists(destination):  # a hard link's second name
                continue
            try:
                os.link(stored, destination)
            except OSError:
                shutil.copyfile(stored, destination)
        return len(kept)

    def survivors(self, order: list[str]) -> dict[str, str]:
        """Apply the layers named in `order` (bottom first): {path in the image: the scratch file
        holding its bytes} of the kept files the top layer's filesystem still has."""
        missing = [key for key in order if key not in self.changes]
        if missing:
            raise EnvbuildError(
                f"the image's layer list names {missing[0]}, which its archive does not hold",
                fix="check the image (docker image inspect); save or push it again",
            )
        return overlay(
            (changes.deleted, changes.opaque, changes.replaced, changes.added)
            for changes in (self.changes[key] for key in order)
        )


def overlay(layers: Iterable[tuple[set[str], set[str], set[str], dict[str, T]]]) -> dict[str, T]:
    """Apply layers bottom first, each given as (deleted, opaque, replaced, added): the added values
    the top layer's filesystem still has, by path. The one implementation of the whiteout rules, for
    files read now (scratch paths) and for facts an audit kept of layers read before (kernels)."""
    kept: dict[str, T] = {}
    for deleted, opaque, replaced, added in layers:
        gone = deleted | replaced
        for path in list(kept):
            if path in gone or _under_any(path, gone) or _under_any(path, opaque):
                del kept[path]
        kept.update(added)
    return kept


def _under_any(path: str, directories: set[str]) -> bool:
    """Whether a parent directory of `path` is in `directories` (the root "" is everyone's parent)."""
    if not directories:
        return False
    parent = posixpath.dirname(path)
    while True:
        if parent in directories:
            return True
        if not parent:
            return False
        parent = posixpath.dirname(parent)
