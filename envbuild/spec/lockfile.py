"""The envbuild.lock file: its data model, its byte-stable TOML form, and the pinned lines it gives.

The lock is an input to planning (render installs its exact, hashed pins) and the output of locking,
so it lives with the spec, below both: `envbuild.lock` imports this module, never the other way.
A small TOML writer for one fixed shape keeps the bytes ours to keep stable.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from envbuild._util import toml
from envbuild._util.files import write_atomic
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import LockError

if TYPE_CHECKING:
    from collections.abc import Callable

LOCK_VERSION = 1
LOCK_NAME = "envbuild.lock"
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


class LockedTarget(Record):
    __slots__ = ("name", "strategy", "python", "base_image", "requirements", "stack", "packages")
    name: str
    strategy: str
    python: str
    base_image: str  # name:tag@sha256:...
    requirements: tuple[str, ...]  # what was resolved: framework requirement(s), then the spec's pip
    stack: tuple[tuple[str, str], ...]
    packages: tuple[LockedPackage, ...]


class Lock(Record):
    __slots__ = ("envbuild", "spec_digest", "matrix_digest", "targets")
    envbuild: str
    spec_digest: str
    matrix_digest: str
    targets: tuple[LockedTarget, ...]

    def target(self, name: str) -> LockedTarget | None:
        return next((t for t in self.targets if t.name == name), None)


def canonical(name: str) -> str:
    return _NAME_RE.sub("-", name).lower()


def lock_path(spec_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(spec_path)), LOCK_NAME)


def lock_for_render(
    spec_file: str, spec_digest: str, matrix_digest: str, warn: Callable[[str], None]
) -> Lock | None:
    """envbuild.lock next to the spec, when there is one: render installs its exact, hashed pins.

    A LockError when it was made for another spec or matrix; a warning when its content digest no
    longer holds (edited by hand), since pip's hash check still judges every install."""
    path = lock_path(spec_file)
    if not os.path.exists(path):
        return None
    lock, intact = load_lock(path)
    if lock.spec_digest != spec_digest or lock.matrix_digest != matrix_digest:
        raise LockError(
            f"{path} does not match {spec_file} and the matrix",
            fix="run `envbuild lock` (or remove envbuild.lock to render unlocked)",
        )
    if not intact:
        warn(f"{path} was edited by hand; pip's hash check will judge it")
    return lock


def load_previous(path: str) -> Lock | None:
    """The lock a relock replaces, or None: a missing or broken lock is replaced, not a reason to stop."""
    if not os.path.exists(path):
        return None
    try:
        return load_lock(path)[0]
    except LockError:
        return None


# ---------------------------------------------------------------------------------------------
# the file: a small TOML writer for a fixed shape, so the bytes are ours to keep stable


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escaping is TOML's for the text envbuild writes: no control characters)."""
    return json.dumps(value)


def _body(lock: Lock) -> str:
    out = [
        f"lock-version = {LOCK_VERSION}",
        f"envbuild = {toml_string(lock.envbuild)}",
        f"spec-digest = {toml_string('sha256:' + lock.spec_digest)}",
        f"matrix-digest = {toml_string('sha256:' + lock.matrix_digest)}",
    ]
    for target in lock.targets:
        out += [
            "",
            "[[target]]",
            f"name = {toml_string(target.name)}",
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
    return "\n".join(out) + "\n"


def dumps(lock: Lock) -> str:
    body = _body(lock)
    digest = hashlib.sha256(body.encode()).hexdigest()
    return f"{HEADER}content-digest = {toml_string('sha256:' + digest)}\n{body}"


def write_lock(path: str, lock: Lock) -> None:
    write_atomic(path, dumps(lock))


def load_lock(path: str) -> tuple[Lock, bool]:
    """The lock and whether its content digest still matches (False: edited by hand)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise LockError(
            f"{path} does not exist", fix="run `envbuild lock` and commit envbuild.lock"
        ) from None
    try:
        data = toml.loads(text)
        lock = _from_data(data)
    except (toml.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        raise LockError(
            f"{path} is malformed ({type(exc).__name__}: {exc})", fix="regenerate it with `envbuild lock`"
        ) from None
    if data.get("lock-version") != LOCK_VERSION:
        raise LockError(
            f"{path} has lock-version {data.get('lock-version')!r}; this envbuild writes {LOCK_VERSION}",
            fix="regenerate it with `envbuild lock`",
        )
    intact = data.get("content-digest") == "sha256:" + hashlib.sha256(_body(lock).encode()).hexdigest()
    return lock, intact


def _from_data(data: dict) -> Lock:
    targets = []
    for t in data["target"]:
        packages = tuple(
            LockedPackage(
                name=p["name"],
                version=p["version"],
                layer=p["layer"],
                index=p["index"],
                hashes=tuple(p["hashes"]),
            )
            for p in t.get("package", [])
        )
        for package in packages:
            if package.layer not in ("framework", "user") or not package.hashes:
                raise ValueError(f"package {package.name} needs a layer and at least one hash")
        stack = tuple(sorted((k.replace("-", "_"), str(v)) for k, v in t["stack"].items()))
        targets.append(
            LockedTarget(
                name=t["name"],
                strategy=t["strategy"],
                python=t["python"],
                base_image=t["base-image"],
                requirements=tuple(t["requirements"]),
                stack=stack,
                packages=packages,
            )
        )
    return Lock(
        envbuild=data["envbuild"],
        spec_digest=data["spec-digest"].removeprefix("sha256:"),
        matrix_digest=data["matrix-digest"].removeprefix("sha256:"),
        targets=tuple(targets),
    )


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
