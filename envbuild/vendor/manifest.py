"""bundle.json, the bundle's manifest (docs/concepts/lockfile.md, "One bundle"): what the bundle holds,
each file with its kind, sha256, size and canonical source. Written last and atomically, so a bundle
without it is unfinished; read back as untrusted input (bounded, every path inside the bundle)."""

from __future__ import annotations

import json
import os
import re

from envbuild._util.files import NotReadable, read_regular, write_atomic
from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record

BUNDLE_VERSION = 1
MANIFEST_NAME = "bundle.json"
KINDS = ("wheel", "uv", "conda", "blob")
MAX_MANIFEST_BYTES = 64 << 20
MAX_FILES = 200_000
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!~%=-]{0,254}")


class BundleFile(Record):
    __slots__ = ("path", "kind", "sha256", "size", "source")
    path: str  # relative, "/"-separated: wheels/x.whl, conda/linux-64/x.conda, oci/blobs/sha256/<hex>
    kind: str  # KINDS
    sha256: str  # 64 hex
    size: int
    source: str  # the canonical URL or image reference it came from


class BundleTarget(Record):
    __slots__ = ("name", "platform", "base_image")
    name: str
    platform: str
    base_image: str


class Manifest(Record):
    __slots__ = ("envbuild", "lock_digest", "targets", "files")
    envbuild: str
    lock_digest: str
    targets: tuple[BundleTarget, ...]
    files: tuple[BundleFile, ...]


def safe_path(path: object) -> str | None:
    """`path` when it is a relative path of plain segments inside the bundle (no '..', no absolute
    path, no empty or dot segment), else None."""
    if not isinstance(path, str) or not path or len(path) > 1024 or "\\" in path:
        return None
    parts = path.split("/")
    if any(not _SEGMENT.fullmatch(part) or part in (".", "..") for part in parts):
        return None
    return path


def dumps(manifest: Manifest) -> str:
    data = {
        "bundle-version": BUNDLE_VERSION,
        "envbuild": manifest.envbuild,
        "lock-digest": manifest.lock_digest,
        "targets": [
            {"name": t.name, "platform": t.platform, "base-image": t.base_image} for t in manifest.targets
        ],
        "files": [
            {"path": f.path, "kind": f.kind, "sha256": f.sha256, "size": f.size, "source": f.source}
            for f in sorted(manifest.files, key=lambda f: f.path)
        ],
    }
    return json.dumps(data, indent=2) + "\n"


def write_manifest(bundle_dir: str, manifest: Manifest) -> None:
    write_atomic(os.path.join(bundle_dir, MANIFEST_NAME), dumps(manifest))


class ManifestProblem(Exception):
    """bundle.json is missing or not what `envbuild vendor` writes; str() says what."""


FIX = "make the bundle again with `envbuild vendor` on the connected machine, and copy it across whole"
CONDA_SUBDIRS = ("linux-64", "linux-aarch64", "noarch")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!~%=-]*$")  # one file name: no separator, no leading dot
_TOP_KEYS = ("bundle-version", "envbuild", "lock-digest", "targets", "files")
_FILE_KEYS = ("path", "kind", "sha256", "size", "source")
_TARGET_KEYS = ("name", "platform", "base-image")


def check_path(path: object, kind: str) -> str | None:
    """Why `path` cannot be a bundle path of `kind` (None: it can): relative, no `..` or empty part,
    under the folder of its kind (wheels/NAME.whl, conda/SUBDIR/NAME, oci/blobs/sha256/HEX)."""
    if safe_path(path) is None:
        return "is not a relative path of plain names inside the bundle"
    assert isinstance(path, str)
    parts = path.split("/")
    if kind in ("wheel", "uv"):
        ok = len(parts) == 2 and parts[0] == "wheels" and _NAME.match(parts[1]) and parts[1].endswith(".whl")
        return None if ok else "is not wheels/<name>.whl"
    if kind == "conda":
        ok = len(parts) == 3 and parts[0] == "conda" and parts[1] in CONDA_SUBDIRS and _NAME.match(parts[2])
        return None if ok else f"is not conda/<{'|'.join(CONDA_SUBDIRS)}>/<file>"
    ok = len(parts) == 4 and parts[:3] == ["oci", "blobs", "sha256"] and _HEX64.fullmatch(parts[3])
    return None if ok else "is not oci/blobs/sha256/<64 hex>"


def _object(value: object, keys: tuple[str, ...], where: str) -> dict:
    if not isinstance(value, dict):
        raise ManifestProblem(f"{where} is not an object")
    unknown = sorted(str(key)[:40] for key in set(value) - set(keys))
    missing = [key for key in keys if key not in value]
    if unknown or missing:
        detail = "; ".join(
            part
            for part in (
                f"unknown key(s) {', '.join(unknown)}" if unknown else "",
                f"missing key(s) {', '.join(missing)}" if missing else "",
            )
            if part
        )
        raise ManifestProblem(f"{where}: {detail} (accepted: {', '.join(keys)})")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise ManifestProblem(f"{where} is not a non-empty string")
    if any(ord(c) < 32 for c in value):
        raise ManifestProblem(f"{where} holds control characters")
    return value


def parse_manifest(data: bytes, where: str = MANIFEST_NAME) -> Manifest:
    """bundle.json's bytes as a Manifest, strictly: known keys only, the version this envbuild reads,
    64-hex digests, whole sizes, each path under the folder of its kind and listed once, a blob's name
    its own sha256; ManifestProblem names the field that is wrong."""
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestProblem(f"{where} is not JSON ({exc})") from None
    top = _object(document, _TOP_KEYS, where)
    version = top["bundle-version"]
    if version != BUNDLE_VERSION or isinstance(version, bool):
        raise ManifestProblem(f"{where} has bundle-version {str(version)[:20]!r}; this envbuild reads 1")
    digest = _text(top["lock-digest"], f"{where}: lock-digest")
    if not (digest.startswith("sha256:") and _HEX64.fullmatch(digest[len("sha256:") :])):
        raise ManifestProblem(f"{where}: lock-digest is not sha256:<64 hex>")
    if not isinstance(top["targets"], list) or not isinstance(top["files"], list):
        raise ManifestProblem(f"{where}: targets and files must be lists")
    if len(top["files"]) > MAX_FILES or len(top["targets"]) > MAX_FILES:
        raise ManifestProblem(f"{where} lists more than {MAX_FILES:,} entries")
    targets = []
    for number, raw in enumerate(top["targets"]):
        at = f"{where}: targets[{number}]"
        item = _object(raw, _TARGET_KEYS, at)
        targets.append(
            BundleTarget(
                name=_text(item["name"], f"{at}.name"),
                platform=_text(item["platform"], f"{at}.platform"),
                base_image=_text(item["base-image"], f"{at}.base-image"),
            )
        )
    files: list[BundleFile] = []
    seen: set[str] = set()
    for number, raw in enumerate(top["files"]):
        at = f"{where}: files[{number}]"
        item = _object(raw, _FILE_KEYS, at)
        kind, path, sha, size = item["kind"], item["path"], item["sha256"], item["size"]
        if kind not in KINDS:
            raise ManifestProblem(f"{at}.kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}")
        problem = check_path(path, kind)
        if problem:
            raise ManifestProblem(f"{at}.path {str(path)[:200]!r} {problem}")
        if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise ManifestProblem(f"{at}.sha256 of {path} is not 64 lowercase hex digits")
        if kind == "blob" and path.rsplit("/", 1)[1] != sha:
            raise ManifestProblem(f"{at}: blob {path} is listed with another sha256 ({sha})")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestProblem(f"{at}.size of {path} is not a whole number of bytes")
        if path in seen:
            raise ManifestProblem(f"{at}: {path} is listed twice")
        seen.add(path)
        files.append(
            BundleFile(
                path=path, kind=kind, sha256=sha, size=size, source=_text(item["source"], f"{at}.source")
            )
        )
    return Manifest(
        envbuild=_text(top["envbuild"], f"{where}: envbuild"),
        lock_digest=digest,
        targets=tuple(targets),
        files=tuple(files),
    )


def read_manifest(bundle_dir: str) -> Manifest:
    """The manifest of `bundle_dir` (bounded, never through a link); ManifestProblem says what is wrong."""
    path = os.path.join(bundle_dir, MANIFEST_NAME)
    if os.path.islink(path):
        raise ManifestProblem(f"{path} is a symbolic link; a bundle holds plain files only")
    try:
        data = read_regular(path, limit=MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise ManifestProblem(
            f"{path} is missing: the bundle is unfinished (run `envbuild vendor -o {bundle_dir}` again)"
        ) from None
    except (OSError, NotReadable) as exc:
        raise ManifestProblem(f"{path} is not a bundle manifest ({exc})") from None
    return parse_manifest(data, path)
