"""The envbuild.lock file: its data model, its byte-stable TOML form, and the pinned lines it gives.

The lock is an input to planning (render installs its exact, hashed pins) and the output of locking,
so it lives in its own package just above the spec, below both: `envbuild.plan` and `envbuild.lock`
import this module, never the other way.
A small TOML writer for one fixed shape keeps the bytes ours to keep stable.
"""

from __future__ import annotations

import json
import os
import re

from envbuild._util.files import write_atomic
from envbuild._util.record import Record
from envbuild.lockfile.seal import content_digest, content_hmac
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.spec.model import LOCK_NAME

LOCK_VERSION = 1
HEADER = (
    "# envbuild.lock: written by `envbuild lock`; do not edit by hand (`envbuild lock --check` catches it).\n"
)
_NAME_RE = re.compile(r"[-_.]+")


class LockedPackage(Record):
    __slots__ = ("name", "version", "layer", "index", "hashes")
    name: str
    version: str
    layer: str  # framework | user
    index: str
    hashes: tuple[str, ...]


class LockedCondaPackage(Record):
    """One package of a conda target's solved conda layer: exactly what micromamba installs (its URL,
    checked against its sha256), and where it came from."""

    __slots__ = ("name", "version", "build", "layer", "channel", "subdir", "url", "sha256")
    name: str
    version: str
    build: str  # the build string, e.g. cuda126_py311_h8b5f2b4_300
    # framework: Python, cuda-version, the framework and what they need (one image layer); user: what
    # the spec's [packages] conda adds on top, solved with the framework layer held (the next layer)
    layer: str
    channel: str  # the channel URL as solved (a mirror's, when the spec names one)
    subdir: str  # linux-64 | linux-aarch64 | noarch
    url: str  # the package file
    sha256: str  # "sha256:<64 hex>" of the package file


class LockedTarget(Record):
    __slots__ = (
        "name",
        "platform",
        "strategy",
        "python",
        "base_image",
        "requirements",
        "stack",
        "packages",
        "conda",
    )
    name: str
    # canonical (matrix.platforms); a target built for several platforms has one entry per platform,
    # each with that platform's wheels, hashes and base-image manifest digest
    platform: str
    strategy: str
    python: str
    base_image: str  # name:tag@sha256:... (the platform's own manifest where the base is multi-platform)
    requirements: tuple[str, ...]  # what was resolved: framework requirement(s), then the spec's pip
    stack: tuple[tuple[str, str], ...]
    packages: tuple[LockedPackage, ...]
    # strategy "conda" only: the solved conda packages (framework layer first, then user, each by
    # name); () for the other strategies
    conda: tuple[LockedCondaPackage, ...]


class LockedMirror(Record):
    """One `[[mirror]]` of the lock: a [mirrors] entry the lock was resolved through. The lock's
    sources (package index, conda channel and url, base-image) are the canonical ones, the same at
    every site; these say which mirror stood in for `source` when it was made (spec.mirrors)."""

    __slots__ = ("source", "mirror")
    source: str
    mirror: str


class Lock(Record):
    __slots__ = ("envbuild", "spec_digest", "matrix_digest", "targets", "mirrors")
    envbuild: str
    spec_digest: str
    matrix_digest: str
    targets: tuple[LockedTarget, ...]
    mirrors: tuple[LockedMirror, ...]  # by source; () for a lock made without mirrors

    def __init__(
        self,
        *,
        envbuild: str,
        spec_digest: str,
        matrix_digest: str,
        targets: tuple[LockedTarget, ...],
        mirrors: tuple[LockedMirror, ...] = (),
    ) -> None:
        super().__init__(
            envbuild=envbuild,
            spec_digest=spec_digest,
            matrix_digest=matrix_digest,
            targets=targets,
            mirrors=mirrors,
        )

    def target(self, name: str, platform: str | None = None) -> LockedTarget | None:
        """The entry of target `name` for `platform` (None: its first, the only one of a
        single-platform target)."""
        return next((t for t in self.targets if t.name == name and platform in (None, t.platform)), None)

    def platforms(self, name: str) -> tuple[str, ...]:
        """The platforms target `name` is locked for, in lock order."""
        return tuple(t.platform for t in self.targets if t.name == name)


def canonical(name: str) -> str:
    return _NAME_RE.sub("-", name).lower()


def lock_path(spec_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(spec_path)), LOCK_NAME)


# ---------------------------------------------------------------------------------------------
# the file: a small TOML writer for a fixed shape, so the bytes are ours to keep stable


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escaping is TOML's for the text envbuild writes: no control characters)."""
    return json.dumps(value)


def body_text(lock: Lock) -> str:
    """What the seal covers: the whole file but its header and seal lines."""
    out = [
        f"lock-version = {LOCK_VERSION}",
        f"envbuild = {toml_string(lock.envbuild)}",
        f"spec-digest = {toml_string('sha256:' + lock.spec_digest)}",
        f"matrix-digest = {toml_string('sha256:' + lock.matrix_digest)}",
    ]
    for mirror in lock.mirrors:  # only a lock made through mirrors has any: the others keep their bytes
        out += [
            "",
            "[[mirror]]",
            f"source = {toml_string(mirror.source)}",
            f"mirror = {toml_string(mirror.mirror)}",
        ]
    for target in lock.targets:
        out += [
            "",
            "[[target]]",
            f"name = {toml_string(target.name)}",
        ]
        if target.platform != DEFAULT_PLATFORM:  # amd64-only locks keep the bytes they had
            out.append(f"platform = {toml_string(target.platform)}")
        out += [
            f"strategy = {toml_string(target.strategy)}",
            f"python = {toml_string(target.python)}",
            f"base-image = {toml_string(target.base_image)}",
            "requirements = [" + ", ".join(toml_string(r) for r in target.requirements) + "]",
            "",
            "[target.stack]",
        ]
        out += [f"{key.replace('_', '-')} = {toml_string(value)}" for key, value in target.stack]
        for package in target.packages:
            out += [
                "",
                "[[target.package]]",
                f"name = {toml_string(package.name)}",
                f"version = {toml_string(package.version)}",
                f"layer = {toml_string(package.layer)}",
                f"index = {toml_string(package.index)}",
                "hashes = [",
            ]
            out += [f"    {toml_string(h)}," for h in package.hashes]
            out.append("]")
        for package in target.conda:  # after the pip packages: pip-only locks keep their bytes
            out += [
                "",
                "[[target.conda]]",
                f"name = {toml_string(package.name)}",
                f"version = {toml_string(package.version)}",
                f"build = {toml_string(package.build)}",
                f"layer = {toml_string(package.layer)}",
                f"channel = {toml_string(package.channel)}",
                f"subdir = {toml_string(package.subdir)}",
                f"url = {toml_string(package.url)}",
                f"sha256 = {toml_string(package.sha256)}",
            ]
    return "\n".join(out) + "\n"


def dumps(lock: Lock, key: bytes | None = None) -> str:
    """The file's text; with a key, also the HMAC a key holder's lock carries (lockfile.seal)."""
    body = body_text(lock)
    seal = f"content-digest = {toml_string(content_digest(body))}\n"
    if key is not None:
        seal += f"content-hmac = {toml_string(content_hmac(body, key))}\n"
    return f"{HEADER}{seal}{body}"


def write_lock(path: str, lock: Lock, key: bytes | None = None) -> None:
    write_atomic(path, dumps(lock, key))


def requirement_lines(packages: tuple[LockedPackage, ...], layer: str) -> str:
    """Hash-pinned lines for `pip install --require-hashes --no-deps -r`."""
    out = []
    for package in packages:
        if package.layer != layer:
            continue
        out.append(
            f"{package.name}=={package.version} \\\n"
            + " \\\n".join(f"    --hash={h}" for h in package.hashes)
        )
    return "\n".join(out) + ("\n" if out else "")
