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

import bz2
import gzip
import lzma
import os
import posixpath
import shutil
import tarfile
import zlib

from envbuild._util import limits
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.wheelzip import NAME_BYTES
from envbuild.audit.tree import is_shared_object_name, judged_through, resolve
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
_BZIP2 = b"BZh"
_XZ = b"\xfd7zXZ\x00"
_CHUNK = 1 << 20


def layer_stream(stream: IO[bytes], key: str, where: str) -> tuple[IO[bytes], str]:
    """(what to read the tar from, tarfile's mode) for a layer blob. tarfile's own gzip reading ("r|*"
    or "r|gz") stops at the end of the first gzip member, while Docker, containerd and GNU tar read
    every member, and an eStargz layer is many members by design: a file in member 2 was invisible to
    the audit and the inventory (issue 33). So a gzip layer goes through gzip.GzipFile, which reads
    them all (bzip2 and xz likewise, every stream of them), and the tar is read as plain ("r|"), so
    the bytes it unpacks to can be counted (_Unpacked); a zstd one is refused by its magic, before
    any byte is taken for a tar."""
    head = stream.read(6)
    rejoined = Prefixed(head, stream)
    if head[:2] == _GZIP:
        return gzip.GzipFile(fileobj=rejoined, mode="rb"), "r|"  # type: ignore[arg-type]
    if head[:3] == _BZIP2 and head[3:4] in b"123456789" and head[4:6] == b"1A":  # BZh9, a block's pi
        return bz2.BZ2File(rejoined, mode="rb"), "r|"  # type: ignore[arg-type]
    if head == _XZ:
        return lzma.LZMAFile(rejoined, mode="rb"), "r|"  # type: ignore[arg-type]
    if head[:4] == _ZSTD:
        raise EnvbuildError(
            f"layer {key} of {where} is zstd-compressed, which envbuild cannot read",
            fix="push the image with gzip layers (the docker and buildx default)",
        )
    return rejoined, "r|"  # type: ignore[return-value]


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


class _Unreadable(Exception):
    """The compressed stream is corrupt (the decompressor's own error, whatever its class)."""


class _Packed:
    """The blob as it arrives: counts the packed bytes, the denominator of the unpack ratio."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        return data


class _Unpacked:
    """The tar stream a layer unpacks to, bounded as it is read (limits.UNPACK_BYTES, UNPACK_RATIO):
    a gzip bomb is stopped at the first read past a bound, not after it filled the disk or the
    memory. `expanded` adds what sparse members unpack to beyond the bytes they store, counted at
    their header, before any of it is written or read."""

    def __init__(self, stream: IO[bytes], packed: _Packed, key: str, where: str) -> None:
        self.stream = stream
        self.packed = packed
        self.key = key
        self.where = where
        self.tar = 0
        self.expanded = 0
        self.member = "its first tar header"
        self.total = limits.UNPACK_BYTES.get()
        self.ratio = limits.UNPACK_RATIO.get()

    def read(self, size: int = -1) -> bytes:
        try:
            data = self.stream.read(size)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise _Unreadable(str(exc)) from None
        self.tar += len(data)
        self.check()
        return data

    @property
    def unpacked(self) -> int:
        return self.tar + self.expanded

    def check(self, coming: int = 0, *, ratio: bool = True) -> None:
        """Refuse the layer when what it unpacked (and `coming`: a member's bytes, judged at its
        header) passes the total, or the ratio to the packed bytes past UNPACK_RATIO_FLOOR. A regular
        member's coming bytes are judged against the total only: its packed bytes are still to come."""
        unpacked = self.unpacked + coming
        if unpacked > self.total:
            env = limits.UNPACK_BYTES.env
            raise EnvbuildError(
                f"layer {self.key} of {self.where} unpacks to more than {limits.size(self.total)} (the "
                f"unpack limit), at member {self.member!r}",
                fix=f"if the image is genuine, raise {env} (bytes; now {self.total})",
            )
        packed = max(self.packed.count, 1)
        if ratio and unpacked > limits.UNPACK_RATIO_FLOOR and unpacked > self.ratio * packed:
            env = limits.UNPACK_RATIO.env
            raise EnvbuildError(
                f"layer {self.key} of {self.where} unpacks to {limits.size(unpacked)} from "
                f"{limits.size(packed)} ({unpacked // packed}:1; the limit is {self.ratio}:1 past the "
                f"first {limits.size(limits.UNPACK_RATIO_FLOOR)}), at member {self.member!r}: a "
                "decompression bomb or a sparse member, which no genuine layer is",
                fix=f"if the image is genuine, raise {env} (now {self.ratio})",
            )


def _clean(name: str) -> str | None:
    """ "./usr/lib/x.so" -> "usr/lib/x.so", "../x.so" -> "x.so"; None for the root itself."""
    path = posixpath.normpath("/" + name).lstrip("/")
    return path or None


class _Link(Record):
    """A symbolic link of a layer, as its tar member gives it (a target outside the tree included)."""

    __slots__ = ("target",)
    target: str


class _Changes:
    """What one layer does to the paths below it: deletions (whiteouts and replacements) and the
    shared objects it adds (path -> the file holding its bytes). `extra` (audit only) holds the other
    ELF files and every symbolic link, so a shared object's name linked to a file of another name is
    judged by that file (Layers.extract); `directories`, every directory the layer has (given, or
    implied by a member under it), replaces a file the layers below had at that path."""

    def __init__(self) -> None:
        self.deleted: set[str] = set()  # the path and everything under it
        self.opaque: set[str] = set()  # everything under the directory
        self.replaced: set[str] = set()  # non-directory entries: the path, and anything under it
        self.added: dict[str, str] = {}
        self.extra: dict[str, str | _Link] = {}
        self.directories: set[str] = set()

    @property
    def links(self) -> dict[str, str]:
        """Every symbolic link of the layer (audit only): path in the image -> its target as written."""
        return {path: value.target for path, value in self.extra.items() if isinstance(value, _Link)}


class Layers:
    """Collects layers' changes under `scratch`, then gives the image's kept files.

    keep: which paths ("usr/lib/x.so", relative to the image's root) to keep the bytes of; None keeps
    the ELF shared objects (by name, then by their ELF magic), what the audit reads, and what a
    symbolic link with a shared object's name may lead to (every other ELF file, and the links).

    Every layer is bounded as it is read (envbuild._util.limits): its unpacked bytes in all and per
    packed byte, a kept member's bytes, its member count and each member's path; a path component
    longer than Linux's NAME_MAX, and a member under a file of its own layer (`x.so` and then
    `x.so/y.so`), are refused as the engines refuse to unpack them.
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
        packed = _Packed(stream)
        unpacked: _Unpacked | None = None
        try:
            opened, mode = layer_stream(packed, key, where)  # type: ignore[arg-type]
            unpacked = _Unpacked(opened, packed, key, where)
            with tarfile.open(fileobj=unpacked, mode=mode) as archive:  # type: ignore[call-overload]
                most = limits.ARCHIVE_ENTRIES.get()
                for entries, member in enumerate(archive, 1):
                    unpacked.member = member.name[:200]
                    if entries > most:
                        raise EnvbuildError(
                            f"layer {key} of {where} has more than {most:,} members (the entries "
                            f"limit), at member {unpacked.member!r}",
                            fix="check the image; no genuine layer holds that many files",
                        )
                    self._member(archive, member, changes, unpacked)
            if self.keep is None:
                changes.added.update(self._links_within(changes))
        except (tarfile.TarError, EOFError, ValueError, zlib.error, gzip.BadGzipFile, _Unreadable) as exc:
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

    def _checked(self, member: tarfile.TarInfo, unpacked: _Unpacked) -> str | None:
        """The member's path in the image, after the bounds on its name and on what it unpacks to."""
        where = f"layer {unpacked.key} of {unpacked.where}"
        most = limits.PATH_CHARACTERS.get()
        if len(member.name) > most or len(member.linkname) > most:
            raise EnvbuildError(
                f"{where} has a member whose path is {max(len(member.name), len(member.linkname)):,} "
                f"characters long (at most {most:,}, Linux's PATH_MAX): {member.name[:80]!r}...",
                fix="check the image; no engine can unpack that member",
            )
        path = _clean(member.name)
        if path is None:
            return None
        for part in path.split("/"):
            if len(part.encode("utf-8", "surrogateescape")) > NAME_BYTES:
                raise EnvbuildError(
                    f"{where} has a member with a {len(part):,}-character file name (at most "
                    f"{NAME_BYTES} bytes, Linux's NAME_MAX): {path[:120]!r}",
                    fix="check the image; no engine can unpack that member (file name too long)",
                )
        if member.issparse():  # counted at the size it unpacks to, before any of it is read
            stored = sum(numbytes for _, numbytes in member.sparse or ())
            unpacked.check(coming=max(member.size - stored, 0))
            unpacked.expanded += max(member.size - stored, 0)
        elif member.isfile():
            unpacked.check(coming=member.size, ratio=False)
        return path

    def _member(
        self, archive: tarfile.TarFile, member: tarfile.TarInfo, changes: _Changes, unpacked: _Unpacked
    ) -> None:
        path = self._checked(member, unpacked)
        if path is None:
            return
        parent, name = posixpath.split(path)
        self._under_a_file(parent, path, changes, unpacked)
        if name == OPAQUE:
            changes.opaque.add(parent)
            return
        if name.startswith(WHITEOUT):
            changes.deleted.add(posixpath.join(parent, name[len(WHITEOUT) :]))
            return
        if member.isdir():
            if path in changes.replaced:  # a directory over a file of its own layer replaces it
                changes.replaced.discard(path)
                changes.added.pop(path, None)
                changes.extra.pop(path, None)
            changes.directories.add(path)
            return
        if path in changes.directories:  # an entry over a directory of its own layer: it replaces it
            self._drop_under(path, changes)
        changes.replaced.add(path)
        changes.added.pop(path, None)
        changes.extra.pop(path, None)
        if member.issym() and self.keep is None:
            changes.extra[path] = _Link(target=member.linkname)
            return
        by_name = is_shared_object_name(posixpath.basename(path))
        wanted = (member.isfile() or member.islnk()) if self.keep is None else self.keep(path)
        if not wanted:
            return
        if member.isfile():
            self._keep(archive, member, path, by_name, changes, unpacked)
        elif member.islnk():  # a hard link to a file earlier in the same layer
            target = _clean(member.linkname)
            if target in changes.added:  # audited under this name too only when it is a library's
                (changes.added if by_name or self.keep is not None else changes.extra)[path] = changes.added[
                    target
                ]
            elif target in changes.extra and isinstance(changes.extra[target], str):
                (changes.added if by_name else changes.extra)[path] = changes.extra[target]

    def _keep(
        self,
        archive: tarfile.TarFile,
        member: tarfile.TarInfo,
        path: str,
        by_name: bool,
        changes: _Changes,
        unpacked: _Unpacked,
    ) -> None:
        """Keep the bytes of a regular member (an ELF one, for the audit), bounded by MEMBER_BYTES."""
        source = archive.extractfile(member)
        if source is None:
            return
        head = source.read(len(_ELF)) if self.keep is None else b""
        if self.keep is None and head != _ELF:
            return
        over = limits.member_over(f"layer {unpacked.key} of {unpacked.where}", path, member.size, "image")
        if over is not None:
            raise EnvbuildError(over[0], fix=over[1])
        self.count += 1
        stored = os.path.join(self.store, str(self.count))
        with open(stored, "wb") as out:
            out.write(head)
            shutil.copyfileobj(source, out, _CHUNK)
        if by_name or self.keep is not None:
            changes.added[path] = stored
        else:
            changes.extra[path] = stored

    @staticmethod
    def _under_a_file(parent: str, path: str, changes: _Changes, unpacked: _Unpacked) -> None:
        """Record the directories `path` implies; refuse it under a non-directory of its own layer
        (`x.so`, then `x.so/y.so`): Docker and containerd fail to unpack such a layer (not a
        directory), so no engine runs what the audit would judge."""
        directory = parent
        while directory and directory not in changes.directories:
            if directory in changes.replaced:
                raise EnvbuildError(
                    f"layer {unpacked.key} of {unpacked.where} holds {path!r} under {directory!r}, a "
                    "file (not a directory) of the same layer: no engine unpacks it",
                    fix="check the image; rebuild it with docker or buildx",
                )
            changes.directories.add(directory)
            directory = posixpath.dirname(directory)

    @staticmethod
    def _drop_under(path: str, changes: _Changes) -> None:
        """An entry at `path` replaces the directory of its own layer there, and all under it."""
        prefix = path + "/"
        for kept in (changes.added, changes.extra):
            for name in [name for name in kept if name.startswith(prefix)]:
                del kept[name]
        changes.directories = {d for d in changes.directories if d != path and not d.startswith(prefix)}

    def extract(self, order: list[str], root: str) -> int:
        """Apply the layers named in `order` (bottom first) and write the surviving kept files under
        `root`; how many there are. A key that was never read is an error. A symbolic link with a
        shared object's name is written as its target's file when the audit would judge it by a name
        the target does not have (audit.tree.judged_through): the loader loads the target's bytes
        under the link's name, so they are judged under it."""
        kept = self.survivors(order)
        if self.keep is None:
            links, followed = self._followed(order)
            kept = {path: stored for path, stored in kept.items() if path not in links}
            kept.update(followed)
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

    @staticmethod
    def _links_within(changes: _Changes) -> dict[str, str]:
        """{link: the file it leads to} for this layer's links that the audit judges through, where
        the layer holds the target itself: what an audit that keeps facts per layer (layerfacts) can
        know of a link without the other layers (extract follows links across layers too)."""
        links = {path: value.target for path, value in changes.extra.items() if isinstance(value, _Link)}
        files = {**{p: v for p, v in changes.extra.items() if isinstance(v, str)}, **changes.added}
        return _judged_through_links(links, files)

    def _followed(self, order: list[str]) -> tuple[set[str], dict[str, str]]:
        """(the surviving links, {link path: the scratch file of its target} for those the audit must
        judge through), resolved in the merged tree as the loader resolves them (absolute targets from the
        image's root, `..` stopping there, at most audit.tree.LINK_HOPS links, never outside the tree)."""
        merged = overlay(
            (
                changes.deleted,
                changes.opaque,
                changes.replaced,
                {**changes.added, **changes.extra},
                changes.directories,
            )
            for changes in (self.changes[key] for key in order)
        )
        links = {path: value.target for path, value in merged.items() if isinstance(value, _Link)}
        files = {path: value for path, value in merged.items() if isinstance(value, str)}
        return set(links), _judged_through_links(links, files)

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
            (changes.deleted, changes.opaque, changes.replaced, changes.added, changes.directories)
            for changes in (self.changes[key] for key in order)
        )


def overlay(layers: Iterable[tuple]) -> dict[str, T]:
    """Apply layers bottom first, each given as (deleted, opaque, replaced, added[, directories]): the
    added values the top layer's filesystem still has, by path. The one implementation of the whiteout
    rules, for files read now (scratch paths) and for facts an audit kept of layers read before
    (kernels). A layer's directory replaces a file the layers below had at its path (overlayfs shows
    the upper directory), and merges with a directory there."""
    kept: dict[str, T] = {}
    for deleted, opaque, replaced, added, *rest in layers:
        gone = deleted | replaced
        directories = rest[0] if rest else set()
        for path in list(kept):
            if path in gone or path in directories or _under_any(path, gone) or _under_any(path, opaque):
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


def _judged_through_links(links: dict[str, str], files: dict[str, str]) -> dict[str, str]:
    """{link: the scratch file of its target} for the links with a shared object's name that lead, in
    the tree `links` and `files` make, to a kept file the audit must judge them by (judged_through)."""
    followed = {}
    for path in links:
        if not is_shared_object_name(posixpath.basename(path)):
            continue
        target = resolve(path, links.get, absolute=True)
        if target is not None and target in files and judged_through(path, target):
            followed[path] = files[target]
    return followed
