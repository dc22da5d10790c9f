"""Reading a bundle (`envbuild vendor`'s output, docs: BUNDLE-FORMAT) for `render/build --bundle`.

A bundle crossed an air gap on a disk someone handed over: everything in it is untrusted. bundle.json
is size-bounded and read strictly (known keys and kinds, 64-hex digests, whole-number sizes, every path
inside the bundle under the folder its kind belongs in, never through a symbolic link), and
`bundle_problems` checks, before anything is written or built, that the bundle holds every file the
lock needs with the sha256 the lock pins: a build that would fail halfway, or install something else,
stops first with each missing or altered file named.

What render takes from it: wheels/ is the wheelhouse (the --wheelhouse code path, unchanged), and
oci/ the base image (envbuild.image.bundlebase loads it into the engine).
"""

from __future__ import annotations

import hashlib
import os
import re

from envbuild._util import limits
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.render.bundleoci import open_member, read_index, read_manifest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envbuild.lockfile.model import Lock, LockedTarget

MANIFEST = "bundle.json"
BUNDLE_VERSION = 1
KINDS = ("wheel", "uv", "conda", "blob")
CONDA_SUBDIRS = ("linux-64", "linux-aarch64", "noarch")
_HEX = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*$")  # one file name: no separator, no leading dot
_TOP_KEYS = ("bundle-version", "envbuild", "lock-digest", "targets", "files")
_FILE_KEYS = ("path", "kind", "sha256", "size", "source")
_TARGET_KEYS = ("name", "platform", "base-image")
FIX = "make the bundle again with `envbuild vendor` on the connected machine, and copy it across whole"


class BundleFile(Record):
    """One file bundle.json lists: its path inside the bundle, its kind, sha256 (64 hex) and size."""

    __slots__ = ("path", "kind", "sha256", "size", "source")
    path: str
    kind: str  # wheel | uv | conda | blob
    sha256: str
    size: int
    source: str


class BundleTarget(Record):
    __slots__ = ("name", "platform", "base_image")
    name: str
    platform: str
    base_image: str


class Bundle(Record):
    """A bundle as bundle.json describes it; `directory` is where it lies on this machine."""

    __slots__ = ("directory", "envbuild", "lock_digest", "targets", "files")
    directory: str
    envbuild: str
    lock_digest: str
    targets: tuple[BundleTarget, ...]
    files: tuple[BundleFile, ...]

    @property
    def wheelhouse(self) -> str:
        return os.path.join(self.directory, "wheels")

    def file(self, path: str) -> BundleFile | None:
        return next((f for f in self.files if f.path == path), None)

    def blob_path(self, digest: str) -> str:
        """bundle-relative path of the blob "sha256:<hex>"."""
        return f"oci/blobs/sha256/{digest.removeprefix('sha256:')}"


def _bad(directory: str, detail: str) -> UsageError:
    return UsageError(f"--bundle {directory}: {os.path.join(directory, MANIFEST)} {detail}", fix=FIX)


def check_path(path: object, kind: str) -> str | None:
    """Why `path` cannot be a bundle path of `kind` (None: it can): relative, no `..` or empty part,
    under the folder of its kind (wheels/NAME.whl, conda/SUBDIR/NAME, oci/blobs/sha256/HEX)."""
    if not isinstance(path, str) or not path or len(path) > limits.PATH_CHARACTERS.get():
        return "is not a path"
    if path.startswith("/") or "\\" in path or any(ord(c) < 32 for c in path):
        return "is not a relative path inside the bundle"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "leaves the bundle or has an empty part"
    if any(len(part.encode()) > limits.NAME_BYTES.get() for part in parts):
        return "has a file name longer than 255 bytes"
    if kind in ("wheel", "uv"):
        ok = len(parts) == 2 and parts[0] == "wheels" and _NAME.match(parts[1]) and parts[1].endswith(".whl")
        return None if ok else "is not wheels/<name>.whl"
    if kind == "conda":
        ok = len(parts) == 3 and parts[0] == "conda" and parts[1] in CONDA_SUBDIRS and _NAME.match(parts[2])
        return None if ok else f"is not conda/<{'|'.join(CONDA_SUBDIRS)}>/<file>"
    ok = len(parts) == 4 and parts[:3] == ["oci", "blobs", "sha256"] and _HEX.match(parts[3])
    return None if ok else "is not oci/blobs/sha256/<64 hex>"


def _object(value: object, keys: tuple[str, ...], where: str, directory: str) -> dict:
    if not isinstance(value, dict):
        raise _bad(directory, f"{where} is not an object")
    unknown = sorted(set(value) - set(keys))
    missing = [key for key in keys if key not in value]
    if unknown or missing:
        detail = "; ".join(
            p
            for p in (
                f"unknown key(s) {', '.join(unknown)}" if unknown else "",
                f"missing key(s) {', '.join(missing)}" if missing else "",
            )
            if p
        )
        raise _bad(directory, f"{where}: {detail} (accepted: {', '.join(keys)})")
    return value


def _text(value: object, where: str, directory: str) -> str:
    if not isinstance(value, str) or not value or len(value) > limits.FIELD_CHARACTERS.get():
        raise _bad(directory, f"{where} is not a non-empty string")
    if any(ord(c) < 32 for c in value):
        raise _bad(directory, f"{where} holds control characters")
    return value


def parse_bundle(directory: str, data: bytes) -> Bundle:
    """bundle.json's bytes as a Bundle; UsageError (exit 2) naming the field that is wrong."""
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(directory, f"is not JSON ({exc})") from None
    top = _object(document, _TOP_KEYS, "the document", directory)
    if top["bundle-version"] != BUNDLE_VERSION or isinstance(top["bundle-version"], bool):
        raise _bad(
            directory,
            f"has bundle-version {str(top['bundle-version'])[:20]!r}; this envbuild reads {BUNDLE_VERSION}",
        )
    digest = _text(top["lock-digest"], "lock-digest", directory)
    if not (digest.startswith("sha256:") and _HEX.match(digest[len("sha256:") :])):
        raise _bad(directory, "lock-digest is not sha256:<64 hex>")
    if not isinstance(top["targets"], list) or not isinstance(top["files"], list):
        raise _bad(directory, "targets and files must be lists")
    entries = limits.ARCHIVE_ENTRIES.get()
    if len(top["files"]) > entries or len(top["targets"]) > entries:
        raise _bad(directory, f"lists more than {entries:,} entries")
    targets = []
    for number, raw in enumerate(top["targets"]):
        where = f"targets[{number}]"
        item = _object(raw, _TARGET_KEYS, where, directory)
        targets.append(
            BundleTarget(
                name=_text(item["name"], f"{where}.name", directory),
                platform=_text(item["platform"], f"{where}.platform", directory),
                base_image=_text(item["base-image"], f"{where}.base-image", directory),
            )
        )
    files: list[BundleFile] = []
    seen: set[str] = set()
    for number, raw in enumerate(top["files"]):
        where = f"files[{number}]"
        item = _object(raw, _FILE_KEYS, where, directory)
        kind = item["kind"]
        if kind not in KINDS:
            raise _bad(directory, f"{where}.kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}")
        problem = check_path(item["path"], kind)
        if problem:
            raise _bad(directory, f"{where}.path {str(item['path'])[:200]!r} {problem}")
        sha = item["sha256"]
        if not isinstance(sha, str) or not _HEX.match(sha):
            raise _bad(directory, f"{where}.sha256 of {item['path']} is not 64 lowercase hex digits")
        if kind == "blob" and item["path"].rsplit("/", 1)[1] != sha:
            raise _bad(directory, f"{where}: blob {item['path']} is listed with another sha256 ({sha})")
        size = item["size"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _bad(directory, f"{where}.size of {item['path']} is not a whole number of bytes")
        if item["path"] in seen:
            raise _bad(directory, f"{where}: {item['path']} is listed twice")
        seen.add(item["path"])
        source = item["source"]
        if not isinstance(source, str) or len(source) > limits.FIELD_CHARACTERS.get():
            raise _bad(directory, f"{where}.source of {item['path']} is not a string")
        files.append(BundleFile(path=item["path"], kind=kind, sha256=sha, size=size, source=source))
    return Bundle(
        directory=directory,
        envbuild=_text(top["envbuild"], "envbuild", directory),
        lock_digest=digest,
        targets=tuple(targets),
        files=tuple(files),
    )


def read_bundle(directory: str) -> Bundle:
    """The bundle at `directory`: bundle.json read (bounded) and parsed; UsageError when it is not one."""
    if not os.path.isdir(directory):
        raise UsageError(
            f"--bundle {directory} is not a directory", fix="pass the directory `envbuild vendor` wrote"
        )
    path = os.path.join(directory, MANIFEST)
    bound = limits.DOCUMENT_BYTES.get()
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            raise _bad(directory, "is missing or not a regular file (a bundle without it is unfinished)")
        with open(path, "rb") as handle:
            data = handle.read(bound + 1)
    except OSError as exc:
        raise _bad(directory, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > bound:
        raise _bad(directory, f"is larger than {limits.size(bound)}")
    return parse_bundle(directory, data)


def file_problem(bundle_dir: str, entry: BundleFile) -> str | None:
    """Why the file `entry` lists is not in the bundle as listed (None: it is): missing, a link, of
    another size, or with another sha256."""
    try:
        with open_member(bundle_dir, entry.path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != entry.size:
                return f"{entry.path} is {size} bytes, bundle.json says {entry.size}"
            digest = hashlib.sha256()
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except FileNotFoundError:
        return f"{entry.path} is listed in bundle.json but missing"
    except OSError as exc:
        return f"{entry.path} cannot be read ({exc.strerror or exc})"
    if digest.hexdigest() != entry.sha256:
        actual = digest.hexdigest()
        return f"{entry.path} has sha256 {actual}, bundle.json says {entry.sha256}: altered or corrupted"
    return None


def _wheel_for(bundle: Bundle, package, entry: LockedTarget) -> tuple[BundleFile | None, list[str]]:
    """The bundle's wheel for a locked package (right name, version, platform, Python and a pinned
    sha256), and the names of wheels of its version there with another sha256."""
    from envbuild.render.wheelgap import takes_python
    from envbuild.render.wheelhouse import canonical, installs_on

    pinned = {h.removeprefix("sha256:") for h in package.hashes}
    others = []
    for item in bundle.files:
        if item.kind != "wheel":
            continue
        name = item.path.rsplit("/", 1)[1]
        parts = name[: -len(".whl")].split("-")
        if len(parts) < 5 or canonical(parts[0]) != canonical(package.name) or parts[1] != package.version:
            continue
        if not installs_on(name, entry.platform) or not takes_python(name, entry.python):
            continue
        if item.sha256 in pinned:
            return item, []
        others.append(item.path)
    return None, others


def base_blobs(bundle_dir: str, base_image: str) -> tuple[list[str], list[str]]:
    """(problems, the bundle-relative paths of the base's manifest, config and layers) for the base
    image `base_image` (name:tag@sha256:...): the manifest the lock pins must be in oci/index.json and
    its blobs in oci/blobs (their bytes are checked by the caller)."""

    digest = base_image.rsplit("@", 1)[-1]
    try:
        index = read_index(bundle_dir)
        if not any(d.get("digest") == digest for d in index):
            return [f"oci/index.json has no entry for the base image {base_image} (manifest {digest})"], []
        manifest = read_manifest(bundle_dir, digest)
    except UsageError as exc:
        return [exc.message], []
    return [], [manifest.path, manifest.config_path, *manifest.layer_paths]


def bundle_problems(bundle_dir: str, lock: Lock, targets: Iterable[str] | None) -> list[str]:
    """What the bundle at bundle_dir lacks for the lock's entries of `targets` (names; None: every
    target), each problem naming the file: a locked wheel or conda file missing or of another sha256,
    the base image's manifest, config or a layer missing or altered, a listed file whose bytes are not
    the ones bundle.json states, and a bundle made for another lock. Empty: the bundle covers it.

    (Until the vendor branch lands this is render's own copy of `envbuild.vendor.check.bundle_problems`;
    the two are one at merge.)"""
    from envbuild.lockfile.model import body_text
    from envbuild.lockfile.seal import content_digest

    try:
        bundle = read_bundle(bundle_dir)
    except UsageError as exc:
        return [exc.message]
    problems: list[str] = []
    digest = content_digest(body_text(lock))
    if bundle.lock_digest != digest:
        problems.append(
            f"bundle.json: lock-digest {bundle.lock_digest} is not this envbuild.lock's ({digest}): the "
            "bundle was made for another lock"
        )
    wanted = set(targets) if targets is not None else None
    needed: dict[str, BundleFile] = {}
    for entry in lock.targets:
        if wanted is not None and entry.name not in wanted:
            continue
        where = f"target {entry.name!r} ({entry.platform})"
        for package in entry.packages:
            found, others = _wheel_for(bundle, package, entry)
            if found is not None:
                needed[found.path] = found
            elif others:
                problems.append(
                    f"{where}: {package.name}=={package.version}: {', '.join(others)} has a sha256 the lock "
                    "does not pin"
                )
            else:
                problems.append(f"{where}: {package.name}=={package.version}: no wheel for it in wheels/")
        for conda in entry.conda:
            path = f"conda/{conda.subdir}/{conda.url.rsplit('/', 1)[-1]}"
            item = bundle.file(path)
            if item is None:
                problems.append(f"{where}: {conda.name} {conda.version}: {path} is not in the bundle")
            elif item.sha256 != conda.sha256.removeprefix("sha256:"):
                problems.append(f"{where}: {path} has sha256 {item.sha256}, the lock pins {conda.sha256}")
            else:
                needed[path] = item
        base_problems, blob_paths = base_blobs(bundle_dir, entry.base_image)
        problems += [f"{where}: {p}" for p in base_problems]
        for path in blob_paths:
            item = bundle.file(path)
            if item is None:
                problems.append(
                    f"{where}: base image {entry.base_image}: {path} is not listed in bundle.json"
                )
            else:
                needed[path] = item
    for item in bundle.files:  # uv's wheels come in as the installer: checked like every needed file
        if item.kind == "uv":
            needed.setdefault(item.path, item)
    for path in sorted(needed):
        problem = file_problem(bundle_dir, needed[path])
        if problem:
            problems.append(problem)
    return problems


def require_covers(bundle_dir: str, lock: Lock | None, targets: Iterable[str] | None) -> Bundle:
    """The bundle, when it covers the lock (bundle_problems is empty); else a UsageError (exit 2, like
    a wheelhouse that lacks a locked wheel) listing each problem, before anything is written."""
    bundle = read_bundle(bundle_dir)
    if lock is None:
        raise UsageError(
            f"--bundle {bundle_dir}: there is no envbuild.lock next to the spec; a bundle serves a lock",
            fix="build with the envbuild.lock the bundle was made from (commit it beside envbuild.toml)",
        )
    problems = bundle_problems(bundle_dir, lock, targets)
    if problems:
        shown = "\n  - ".join(problems[:20]) + (
            f"\n  - ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        )
        raise UsageError(
            f"--bundle {bundle_dir} does not cover envbuild.lock:\n  - {shown}",
            fix=FIX,
        )
    return bundle
