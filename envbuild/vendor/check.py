"""Whether a bundle covers a lock: `bundle_problems`, offline, what `doctor --bundle` reports and what
`build --bundle` calls before it builds.

The bundle is untrusted input: bundle.json is bounded and every path in it must stay inside the bundle
(no absolute path, no '..', no symbolic link on the way); every file it lists must be there, a plain
file, with its size and sha256. Then, for each requested lock entry: each locked package has a wheel
in wheels/ whose sha256 the lock pins and whose tags suit the entry's platform and Python; uv's wheel
for the platform's machine is there (installer uv); each conda file is in conda/<subdir>/ with its
sha256; the base image's manifest (the lock's digest), config and layers are blobs with their digests.

Imports neither docker nor requests: it reads files only.
"""

from __future__ import annotations

import os
import stat

from envbuild._util.record import TYPE_CHECKING
from envbuild.vendor.manifest import ManifestProblem, read_manifest, safe_path

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envbuild.lockfile.model import Lock, LockedTarget

MAX_DOCUMENT = 4 << 20  # an image manifest or index.json (distribution's own limit is 4 MiB)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


def _inside(bundle_dir: str, relative: str) -> str | None:
    """The absolute path of `relative`, None when a component is a symbolic link or it leaves the bundle."""
    root = os.path.realpath(bundle_dir)
    path = root
    for part in relative.split("/"):
        path = os.path.join(path, part)
        if os.path.islink(path):
            return None
    return path if os.path.realpath(path).startswith(root + os.sep) else None


def _hash(path: str) -> str:
    from envbuild.vendor.download import sha256_of

    return sha256_of(path)


def _selected(lock: Lock, targets: Iterable[str | LockedTarget] | None) -> list[LockedTarget]:
    wanted = list(targets or ())
    if not wanted:
        return list(lock.targets)
    names = {t for t in wanted if isinstance(t, str)}
    entries = [t for t in wanted if not isinstance(t, str)]
    return entries + [t for t in lock.targets if t.name in names and t not in entries]


class _Checker:
    def __init__(self, bundle_dir: str) -> None:
        self.bundle_dir = bundle_dir
        self.problems: list[str] = []
        self.good: dict[str, str] = {}  # relative path -> sha256 of the files found intact

    def listed(self, relative: str, sha256: str, size: int) -> None:
        path = _inside(self.bundle_dir, relative)
        if path is None:
            self.problems.append(
                f"{relative}: a symbolic link, or outside the bundle; a bundle holds plain files"
            )
            return
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            self.problems.append(f"{relative}: listed in bundle.json, missing from the bundle")
            return
        except OSError as exc:
            self.problems.append(f"{relative}: cannot be read ({exc.strerror or exc})")
            return
        if not stat.S_ISREG(info.st_mode):
            self.problems.append(f"{relative}: not a plain file")
            return
        if info.st_size != size:
            self.problems.append(f"{relative}: {info.st_size} bytes, and bundle.json says {size} (corrupted)")
            return
        actual = _hash(path)
        if actual != sha256:
            self.problems.append(f"{relative}: sha256 {actual}, and bundle.json says {sha256} (corrupted)")
            return
        self.good[relative] = sha256

    def blob(self, digest: str) -> bytes | None:
        """An intact small blob's bytes (a manifest), or None."""
        relative = f"oci/blobs/sha256/{digest.removeprefix('sha256:')}"
        if self.good.get(relative) != digest.removeprefix("sha256:"):
            return None
        with open(os.path.join(self.bundle_dir, *relative.split("/")), "rb") as handle:
            return handle.read(MAX_DOCUMENT + 1)


def _json(body: bytes | None) -> dict | None:
    from envbuild._util.jsontext import parse_json

    if body is None or len(body) > MAX_DOCUMENT:
        return None
    try:
        value = parse_json(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _digest(value: object) -> str | None:
    import re

    if isinstance(value, dict):
        value = value.get("digest")
    return value if isinstance(value, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", value) else None


def _image_problems(checker: _Checker, entry: LockedTarget, where: str, index: dict | None) -> list[str]:
    from envbuild.oci.reference import parse_reference

    digest = parse_reference(entry.base_image).digest or ""
    listed = [m for m in (index or {}).get("manifests", []) if isinstance(m, dict)] if index else []
    if index is None:
        return [f"{where}: oci/index.json is missing or not an OCI image index"]
    if not any(_digest(m) == digest for m in listed):
        return [f"{where}: oci/index.json has no entry for the base image {entry.base_image}"]
    blob = f"oci/blobs/sha256/{digest.removeprefix('sha256:')}"
    manifest = _json(checker.blob(digest))
    if manifest is None:
        return [
            f"{where}: {blob} (the base image's manifest) is missing, corrupted or not listed in bundle.json"
        ]
    if manifest.get("mediaType") in INDEX_TYPES or ("manifests" in manifest and "config" not in manifest):
        wanted = entry.platform.split("/")
        inner = next(
            (
                _digest(m)
                for m in manifest.get("manifests") or []
                if isinstance(m, dict)
                and isinstance(m.get("platform"), dict)
                and [m["platform"].get("os"), m["platform"].get("architecture")] == wanted[:2]
            ),
            None,
        )
        manifest = _json(checker.blob(inner)) if inner else None
        if manifest is None:
            return [f"{where}: the {entry.platform} manifest of {entry.base_image} is not among the blobs"]
    needed = [_digest(manifest.get("config"))]
    layers = manifest.get("layers")
    needed += [_digest(layer) for layer in layers] if isinstance(layers, list) else [None]
    problems = []
    for number, need in enumerate(needed):
        what = "config" if number == 0 else f"layer {number}"
        if need is None:
            problems.append(f"{where}: {blob} names no sha256 {what}")
        elif checker.good.get(f"oci/blobs/sha256/{need.removeprefix('sha256:')}") != need.removeprefix(
            "sha256:"
        ):
            problems.append(
                f"{where}: the base image's {what} oci/blobs/sha256/{need.removeprefix('sha256:')} is "
                "missing, corrupted or not listed in bundle.json"
            )
    return problems


def bundle_problems(
    bundle_dir: str,
    lock: Lock,
    targets: Iterable[str | LockedTarget] | None = None,
    *,
    installer: str = "uv",
    uv_version: str | None = None,
) -> list[str]:
    """Every way the bundle at `bundle_dir` fails to cover `lock`'s entries, each naming the file; []
    when it covers them. `targets`: target names (each with all its platforms) or lock entries; None
    or empty: every entry. `installer`: the spec's [image] installer (uv: uv's wheel must be there,
    of `uv_version`, default the uv envbuild runs)."""
    from envbuild.lockfile.model import body_text, canonical
    from envbuild.lockfile.seal import content_digest
    from envbuild.matrix.platforms import platform as platform_named
    from envbuild.vendor.tags import normal_version, release_of, wheel_suits
    from envbuild.vendor.uvwheel import host_uv_version, uv_wheel_matches

    if not os.path.isdir(bundle_dir):
        return [f"{bundle_dir}: not a directory (make a bundle with `envbuild vendor -o {bundle_dir}`)"]
    try:
        manifest = read_manifest(bundle_dir)
    except ManifestProblem as exc:
        return [str(exc)]
    problems: list[str] = []
    digest = content_digest(body_text(lock))
    if manifest.lock_digest != digest:
        problems.append(
            f"bundle.json: lock-digest {manifest.lock_digest} is not this envbuild.lock's ({digest}): the "
            "bundle was made for another lock (run `envbuild vendor` again)"
        )
    checker = _Checker(bundle_dir)
    checker.problems = problems
    for file in manifest.files:
        checker.listed(file.path, file.sha256, file.size)
    kinds = {file.path: file.kind for file in manifest.files}
    wheels = [
        (path.split("/", 1)[1], sha)
        for path, sha in checker.good.items()
        if path.startswith("wheels/") and path.count("/") == 1 and kinds[path] in ("wheel", "uv")
    ]
    index = _json(_read_small(bundle_dir, "oci/index.json"))
    version = uv_version or host_uv_version()
    machines_done: set[str] = set()
    for entry in _selected(lock, targets):
        where = f"target {entry.name} ({entry.platform})"
        for package in entry.packages:
            hashes = {h.removeprefix("sha256:") for h in package.hashes}
            wanted = (canonical(package.name), normal_version(package.version))
            if not any(
                sha in hashes
                and release_of(name) == wanted
                and wheel_suits(name, entry.platform, entry.python)
                for name, sha in wheels
            ):
                problems.append(
                    f"{where}: wheels/ has no {package.name}=={package.version} wheel for Python "
                    f"{entry.python} whose sha256 the lock pins"
                )
        machine = platform_named(entry.platform).machine
        if installer == "uv" and machine not in machines_done:
            machines_done.add(machine)
            if not version or not any(uv_wheel_matches(name, version, machine) for name, _ in wheels):
                problems.append(f"{where}: wheels/ has no uv {version or '(any)'} wheel for Linux {machine}")
        for package in entry.conda:
            from urllib.parse import unquote, urlsplit

            name = unquote(urlsplit(package.url).path.rsplit("/", 1)[-1])
            relative = safe_path(f"conda/{package.subdir}/{name}") or f"conda/{package.subdir}/{name}"
            if checker.good.get(relative) != package.sha256.removeprefix("sha256:"):
                problems.append(
                    f"{where}: {relative} (conda {package.name}) is missing, corrupted or not listed"
                )
        problems += _image_problems(checker, entry, where, index)
    return list(dict.fromkeys(problems))


def _read_small(bundle_dir: str, relative: str) -> bytes | None:
    from envbuild._util.files import NotReadable, read_regular

    path = _inside(bundle_dir, relative)
    if path is None:
        return None
    try:
        return read_regular(path, limit=MAX_DOCUMENT)
    except (OSError, NotReadable):
        return None
