"""bundle.json, the bundle's manifest (docs: BUNDLE-FORMAT in the README): what the bundle holds,
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


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) > 4096:
        raise ManifestProblem(f"{where} must be a string")
    return value


def read_manifest(bundle_dir: str) -> Manifest:
    """The manifest of `bundle_dir`, its every field checked; ManifestProblem says what is wrong."""
    path = os.path.join(bundle_dir, MANIFEST_NAME)
    if os.path.islink(path):
        raise ManifestProblem(f"{path} is a symbolic link; a bundle holds plain files only")
    try:
        data = parse_json(read_regular(path, limit=MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        raise ManifestProblem(
            f"{path} is missing: the bundle is unfinished (run `envbuild vendor -o {bundle_dir}` again)"
        ) from None
    except (OSError, NotReadable, ValueError) as exc:
        raise ManifestProblem(f"{path} is not a bundle manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("bundle-version") != BUNDLE_VERSION:
        raise ManifestProblem(f"{path}: bundle-version must be {BUNDLE_VERSION}")
    targets_raw, files_raw = data.get("targets"), data.get("files")
    if not isinstance(targets_raw, list) or not isinstance(files_raw, list) or len(files_raw) > MAX_FILES:
        raise ManifestProblem(f"{path}: 'targets' and 'files' must be lists")
    targets = []
    for number, raw in enumerate(targets_raw):
        if not isinstance(raw, dict):
            raise ManifestProblem(f"{path}: targets[{number}] must be an object")
        targets.append(
            BundleTarget(
                name=_text(raw.get("name"), f"{path}: targets[{number}].name"),
                platform=_text(raw.get("platform"), f"{path}: targets[{number}].platform"),
                base_image=_text(raw.get("base-image"), f"{path}: targets[{number}].base-image"),
            )
        )
    files = []
    for number, raw in enumerate(files_raw):
        where = f"{path}: files[{number}]"
        if not isinstance(raw, dict):
            raise ManifestProblem(f"{where} must be an object")
        relative = safe_path(raw.get("path"))
        if relative is None:
            raise ManifestProblem(
                f"{where}.path {str(raw.get('path'))[:200]!r} is not a path inside the bundle"
            )
        kind, sha256, size = raw.get("kind"), raw.get("sha256"), raw.get("size")
        if kind not in KINDS:
            raise ManifestProblem(f"{where}.kind must be one of {', '.join(KINDS)}")
        if not isinstance(sha256, str) or not _HEX64.fullmatch(sha256):
            raise ManifestProblem(f"{where}.sha256 must be 64 lowercase hex digits")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestProblem(f"{where}.size must be a whole number")
        files.append(
            BundleFile(
                path=relative,
                kind=kind,
                sha256=sha256,
                size=size,
                source=_text(raw.get("source"), f"{where}.source"),
            )
        )
    return Manifest(
        envbuild=_text(data.get("envbuild"), f"{path}: envbuild"),
        lock_digest=_text(data.get("lock-digest"), f"{path}: lock-digest"),
        targets=tuple(targets),
        files=tuple(files),
    )
