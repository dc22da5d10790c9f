"""Every field of envbuild.lock, validated on read with the spec's own rules.

The lock is input like the spec: a reviewed file anyone can edit, and its values reach the
Dockerfile (FROM), the requirement files pip reads, and the labels. So nothing in it is trusted
for its shape: unknown keys, unpinned base images, names that are not package names, hashes that
are not sha256 hex, and text that could start a new line are all refused, naming the field.
"""

from __future__ import annotations

import os
import re
from typing import Any

from envbuild._util import limits, toml
from envbuild._util.files import NotReadable, read_regular
from envbuild._util.record import Record
from envbuild.errors import LockError
from envbuild.lockfile.model import (
    LOCK_VERSION,
    Lock,
    LockedCondaPackage,
    LockedMirror,
    LockedPackage,
    LockedTarget,
    body_text,
)
from envbuild.lockfile.seal import DIGEST_PREFIX, HMAC_PREFIX, content_digest
from envbuild.matrix.model import STRATEGIES
from envbuild.matrix.platforms import DEFAULT_PLATFORM, PLATFORMS
from envbuild.oci.reference import parse_reference
from envbuild.spec import validate

TOP_KEYS = (
    "lock-version",
    "envbuild",
    "content-digest",
    "content-hmac",
    "spec-digest",
    "matrix-digest",
    "mirror",
    "target",
)
TARGET_KEYS = (
    "name",
    "strategy",
    "python",
    "base-image",
    "requirements",
    "stack",
    "package",
    "platform",
    "conda",
)
MIRROR_KEYS = ("source", "mirror")
PACKAGE_KEYS = ("name", "version", "layer", "index", "hashes")
CONDA_KEYS = ("name", "version", "build", "layer", "channel", "subdir", "url", "sha256")
CONDA_SUBDIRS = ("linux-64", "linux-aarch64", "noarch")
LAYERS = ("framework", "user")
# the stack facts a lock records (envbuild.lock.locker writes them from the plan's stack document)
STACK_KEYS = (
    "framework",
    "framework_version",
    "variant",
    "cuda",
    "cudnn",
    "nccl",
    "min_driver",
    "compat",
    "index_url",
    "os",
    "arch",
    "cuda_from",
)

_HEX64 = "[0-9a-f]{64}"
_DIGEST_RE = re.compile(re.escape(DIGEST_PREFIX) + _HEX64)
_HMAC_RE = re.compile(re.escape(HMAC_PREFIX) + _HEX64)
_HASH_RE = re.compile("sha256:" + _HEX64)
_VERSION_TEXT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}", re.ASCII)
_PACKAGE_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", re.ASCII)  # canonical (PEP 503) names
_PYTHON_RE = re.compile(r"3\.[0-9]{1,2}", re.ASCII)
_STACK_VALUE_RE = re.compile(r"[A-Za-z0-9<>=][A-Za-z0-9 ._+:;,()/<>=*-]{0,127}", re.ASCII)


def _keys(where: str, table: Any, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table")
    for key in table:
        if key not in allowed:
            raise ValueError(f"{where} has an unknown key {key!r} (accepted: {', '.join(allowed)})")
    for key in required:
        if key not in table:
            raise ValueError(f"{where} is missing {key!r}")
    return table


def _text(where: str, value: Any, check=None, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} = {value!r}: expected a string")
    try:
        validate.reject_metacharacters(value, allowed=";")
        if check is not None:
            checked = check(value)
            if checked != value:
                raise ValueError(f"is not in the form envbuild writes ({checked!r})")
    except ValueError as exc:
        raise ValueError(f"{where} = {value!r} {exc}") from None
    if pattern is not None and not pattern.fullmatch(value):
        raise ValueError(f"{where} = {value!r} is not {what}")
    return value


def _strings(where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    return value


def _base_image(where: str, value: Any) -> str:
    _text(where, value, validate.image_ref)
    if not parse_reference(value).digest:
        raise ValueError(f"{where} = {value!r} is not pinned by digest (name:tag@sha256:<64 hex>)")
    return value


def _version(where: str, value: Any) -> str:
    from packaging.version import InvalidVersion, Version

    _text(where, value, pattern=_VERSION_TEXT_RE, what="a package version")
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{where} = {value!r} is not a PEP 440 version") from None
    return value


def _package(where: str, raw: Any) -> LockedPackage:
    table = _keys(where, raw, PACKAGE_KEYS, PACKAGE_KEYS)
    name = _text(f"{where} name", table["name"], pattern=_PACKAGE_RE, what="a normalized package name")
    where = f"{where} ({name})"
    layer = _text(f"{where} layer", table["layer"])
    if layer not in LAYERS:
        raise ValueError(f"{where} layer = {layer!r} is not one of {', '.join(LAYERS)}")
    hashes = tuple(
        _text(f"{where} hashes", h, pattern=_HASH_RE, what="sha256:<64 hex>")
        for h in _strings(f"{where} hashes", table["hashes"])
    )
    if not hashes:
        raise ValueError(f"{where} has no hashes; every package is installed with --require-hashes")
    if list(hashes) != sorted(set(hashes)):
        raise ValueError(f"{where} hashes are not sorted and unique, as envbuild writes them")
    return LockedPackage(
        name=name,
        version=_version(f"{where} version", table["version"]),
        layer=layer,
        index=_text(f"{where} index", table["index"], validate.url),
        hashes=hashes,
    )


_CONDA_NAME_RE = re.compile(r"[a-z0-9_][a-z0-9_.-]*", re.ASCII)
_CONDA_VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_]{0,63}", re.ASCII)
_CONDA_BUILD_RE = re.compile(r"[A-Za-z0-9_.]{1,128}", re.ASCII)


_CONDA_FILE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+!-]{0,254}", re.ASCII)
CONDA_EXTENSIONS = (".conda", ".tar.bz2")


def _conda_package(where: str, raw: Any) -> LockedCondaPackage:
    table = _keys(where, raw, CONDA_KEYS, CONDA_KEYS)
    for key in CONDA_KEYS:
        if not isinstance(table[key], str):
            raise ValueError(f"{where} {key} = {table[key]!r}: expected a string")
    package = LockedCondaPackage(**{key: table[key] for key in CONDA_KEYS})
    check_conda_package(package, where=where)
    return package


def check_conda_package(
    package: LockedCondaPackage, *, where: str = "", file_name: str | None = None
) -> None:
    """The one check of a locked conda package, for the lock's readers and for `envbuild lock` before
    it writes one (envbuild.lock.conda), so `lock` never writes what `render` and `lock --check`
    refuse: every field by its pattern; a sha256 (micromamba checks the download against it); a URL
    whose file name is `<name>-<version>-<build>.conda|.tar.bz2` in the package's subdir, with no
    character a shell or a path would read (a slash, `$(...)`, a newline). `file_name`: the name the
    channel gave the file, when it is known (at lock time); it must be the URL's. ValueError names
    the field; `where` leads it (the reader's "target 'x' conda #3")."""
    lead = f"{where} " if where else ""
    name = _text(f"{lead}name", package.name, pattern=_CONDA_NAME_RE, what="a conda package name")
    lead = f"{where} ({name}) " if where else ""
    version = _text(f"{lead}version", package.version, pattern=_CONDA_VERSION_RE, what="a conda version")
    build = _text(f"{lead}build", package.build, pattern=_CONDA_BUILD_RE, what="a conda build string")
    if package.subdir not in CONDA_SUBDIRS:
        raise ValueError(f"{lead}subdir = {package.subdir!r} is not one of {', '.join(CONDA_SUBDIRS)}")
    if package.layer not in LAYERS:
        raise ValueError(f"{lead}layer = {package.layer!r} is not one of {', '.join(LAYERS)}")
    if not package.sha256:
        raise ValueError(
            f"{lead}sha256 is missing (the channel's repodata.json gives none, so the download could "
            "not be checked)"
        )
    _text(f"{lead}sha256", package.sha256, pattern=_HASH_RE, what="sha256:<64 hex>")
    _text(f"{lead}channel", package.channel, validate.url)
    if file_name is not None and not _CONDA_FILE_RE.fullmatch(file_name):
        raise ValueError(
            f"{lead}file name {file_name[:200]!r} is not a safe package file name (letters, digits and "
            "_.+!- only: no slash, no shell characters, no newline)"
        )
    url = _text(f"{lead}url", package.url, validate.url)
    directory, _, last = url.rpartition("/")
    expected = f"{name}-{version}-{build}"
    if f"/{package.subdir}/" not in directory + "/" or not last.endswith(CONDA_EXTENSIONS):
        raise ValueError(f"{lead}url = {url!r} is not a {package.subdir} package file (.conda or .tar.bz2)")
    shown = last if file_name is None else file_name
    if not _CONDA_FILE_RE.fullmatch(last) or last not in (expected + ext for ext in CONDA_EXTENSIONS):
        raise ValueError(
            f"{lead}url's file name {last[:200]!r} is not {expected}.conda or {expected}.tar.bz2: the "
            "package's name, version and build contradict the file it downloads"
        )
    if file_name is not None and shown != last:
        raise ValueError(f"{lead}url {url!r} does not end with the channel's file name {file_name[:200]!r}")


def _target(index: int, raw: Any) -> LockedTarget:
    where = f"[[target]] #{index + 1}"
    table = _keys(where, raw, TARGET_KEYS, TARGET_KEYS[:-3])
    name = _text(f"{where} name", table["name"], validate.target_name)
    where = f"target {name!r}"
    strategy = _text(f"{where} strategy", table["strategy"])
    if strategy not in STRATEGIES:
        raise ValueError(f"{where} strategy = {strategy!r} is not one of {', '.join(STRATEGIES)}")
    stack_table = _keys(
        f"{where} [target.stack]", table["stack"], tuple(k.replace("_", "-") for k in STACK_KEYS), ()
    )
    stack = []
    for key, value in stack_table.items():
        field = f"{where} stack {key}"
        check = validate.url if key == "index-url" else None
        stack.append(
            (
                key.replace("-", "_"),
                _text(field, value, check, None if check else _STACK_VALUE_RE, "a stack value"),
            )
        )
    packages = tuple(
        _package(f"{where} package #{i + 1}", p)
        for i, p in enumerate(_strings(f"{where} package", table.get("package", [])))
    )
    order = [(LAYERS.index(p.layer), p.name) for p in packages]
    if order != sorted(set(order)) or len({p.name for p in packages}) != len(packages):
        raise ValueError(f"{where} packages are not each listed once, framework layer first, by name")
    conda = tuple(
        _conda_package(f"{where} conda #{i + 1}", p)
        for i, p in enumerate(_strings(f"{where} conda", table.get("conda", [])))
    )
    order = [(LAYERS.index(p.layer), p.name) for p in conda]
    if order != sorted(set(order)) or len({p.name for p in conda}) != len(conda):
        raise ValueError(f"{where} conda packages are not each listed once, framework layer first, by name")
    if conda and strategy != "conda":
        raise ValueError(f"{where} has conda packages, but its strategy is {strategy!r}")
    platform = _text(f"{where} platform", table.get("platform", DEFAULT_PLATFORM))
    if platform not in PLATFORMS:  # written canonical by envbuild: an alias here is a hand edit
        raise ValueError(f"{where} platform is {platform!r}; accepted: {', '.join(PLATFORMS)}")
    return LockedTarget(
        name=name,
        platform=platform,
        strategy=strategy,
        python=_text(f"{where} python", table["python"], pattern=_PYTHON_RE, what="a Python X.Y"),
        base_image=_base_image(f"{where} base-image", table["base-image"]),
        requirements=tuple(
            _text(f"{where} requirements", r, validate.pip_requirement)
            for r in _strings(f"{where} requirements", table["requirements"])
        ),
        stack=tuple(sorted(stack)),
        packages=packages,
        conda=conda,
    )


def _mirrors(raw: Any) -> tuple[LockedMirror, ...]:
    """[[mirror]]: the [mirrors] entries the lock was made through, each checked as the spec checks
    one (spec.mirrors.check_entry: URL or image-name prefixes of one kind, no credentials), listed
    once each by source, as envbuild writes them. Bounded: no more than the spec may hold."""
    from envbuild.spec.mirrors import MAX_MIRRORS, check_entry

    entries = _strings("mirror", raw)
    if len(entries) > MAX_MIRRORS:
        raise ValueError(f"mirror has {len(entries)} entries; at most {MAX_MIRRORS} are accepted")
    found = []
    for index, item in enumerate(entries):
        where = f"[[mirror]] #{index + 1}"
        table = _keys(where, item, MIRROR_KEYS, MIRROR_KEYS)
        source = _text(f"{where} source", table["source"])
        mirror = _text(f"{where} mirror", table["mirror"])
        try:
            entry = check_entry(source, mirror)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if (entry.source, entry.mirror) != (source, mirror):
            raise ValueError(
                f"{where} source = {source!r} mirror = {mirror!r} is not in the form envbuild writes "
                f"({entry.source!r} = {entry.mirror!r})"
            )
        found.append(LockedMirror(source=source, mirror=mirror))
    if [m.source for m in found] != sorted({m.source for m in found}):
        raise ValueError("[[mirror]] entries are not each listed once, by source, as envbuild writes them")
    return tuple(found)


def lock_from_data(data: dict[str, Any]) -> tuple[Lock, str, str | None]:
    """(lock, content digest, content HMAC or None) from parsed TOML; ValueError names the field."""
    _keys("the top level", data, TOP_KEYS, tuple(k for k in TOP_KEYS if k not in ("content-hmac", "mirror")))
    if data["lock-version"] != LOCK_VERSION or isinstance(data["lock-version"], bool):
        raise ValueError(
            f"lock-version is {data['lock-version']!r}; this envbuild reads and writes {LOCK_VERSION}"
        )
    digests = {
        key: _text(key, data[key], pattern=_DIGEST_RE, what="sha256:<64 hex>")
        for key in ("content-digest", "spec-digest", "matrix-digest")
    }
    mac = data.get("content-hmac")
    if mac is not None:
        _text("content-hmac", mac, pattern=_HMAC_RE, what="hmac-sha256:<64 hex>")
    raw_targets = data["target"]
    if not isinstance(raw_targets, list):
        raise ValueError("target must be an array of tables, written [[target]]")
    targets = tuple(_target(i, t) for i, t in enumerate(raw_targets))
    names = [(t.name, t.platform) for t in targets]
    if len(set(names)) != len(names):
        raise ValueError("a target name is used twice for one platform")
    lock = Lock(
        envbuild=_text("envbuild", data["envbuild"], pattern=_VERSION_TEXT_RE, what="a version"),
        spec_digest=digests["spec-digest"].removeprefix(DIGEST_PREFIX),
        matrix_digest=digests["matrix-digest"].removeprefix(DIGEST_PREFIX),
        targets=targets,
        mirrors=_mirrors(data.get("mirror", [])),
    )
    return lock, digests["content-digest"], mac


class LockFile(Record):
    """A lock as read: the validated model, its body (what the seal covers) and the seal it carries."""

    __slots__ = ("lock", "body", "digest", "hmac")
    lock: Lock
    body: str
    digest: str
    hmac: str | None


def read_lock(path: str) -> LockFile:
    """The lock at `path`, every field validated: a LockError names the first bad one."""
    try:
        text = read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8")
    except NotReadable as exc:  # a FIFO waited for ever, /dev/zero filled memory (issue 33)
        raise LockError(f"{path} is not a lock file: {exc}", fix="pass the envbuild.lock file") from None
    except FileNotFoundError:
        raise LockError(
            f"{path} does not exist", fix="run `envbuild lock` and commit envbuild.lock"
        ) from None
    except IsADirectoryError:
        raise LockError(
            f"{path} is a directory, not a lock file", fix="pass the envbuild.lock file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"cannot read {path}: {exc}", fix="regenerate it with `envbuild lock`") from None
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise LockError(
            f"{path} is malformed (not TOML: {exc})", fix="regenerate it with `envbuild lock`"
        ) from None
    try:
        lock, digest, mac = lock_from_data(data)
    except ValueError as exc:
        raise LockError(f"{path} is malformed: {exc}", fix="regenerate it with `envbuild lock`") from None
    return LockFile(lock=lock, body=body_text(lock), digest=digest, hmac=mac)


def load_lock(path: str) -> tuple[Lock, bool]:
    """The lock and whether its content digest still matches (False: edited by hand)."""
    read = read_lock(path)
    return read.lock, read.digest == content_digest(read.body)


def load_previous(path: str) -> Lock | None:
    """The lock a relock replaces, or None: a missing or broken lock is replaced, not a reason to stop."""
    if not os.path.exists(path):
        return None
    try:
        return load_lock(path)[0]
    except LockError:
        return None
