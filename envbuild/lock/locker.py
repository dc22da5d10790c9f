"""`envbuild lock`: the whole stack of every target pinned in one byte-stable TOML file.

Per target: the resolved stack, the base image by digest, and the complete Python closure for linux
x86_64 at the target's Python (name, version, the index it came from, every sha256). The closure is
resolved by uv for the *target* platform (pip evaluates markers for the host), in two layers that
mirror the image: the framework from its variant's index, then the user packages from the spec's
index with the framework's closure as constraints.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile

from envbuild import __version__
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix
    from envbuild.render.plan import Plan
    from envbuild.spec.model import Spec, Target

LOCK_VERSION = 1
LOCK_NAME = "envbuild.lock"
UV_PLATFORM = "x86_64-manylinux_2_28"
HEADER = (
    "# envbuild.lock: written by `envbuild lock`; do not edit by hand (`envbuild lock --check` catches it).\n"
)
_NAME_RE = re.compile(r"[-_.]+")


class LockError(EnvbuildError):
    """The lock is missing, malformed or out of date: a CI failure (exit 1)."""


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


# ---------------------------------------------------------------------------------------------
# resolving with uv


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        found = shutil.which("uv")
        if found:
            return found
    raise EnvbuildError("uv is not installed", fix="pip install uv (envbuild depends on it for locking)")


def parse_compiled(text: str) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    """(name, version, index, hashes) from `uv pip compile --generate-hashes --emit-index-annotation`."""
    entries: list[tuple[str, str, str | None, tuple[str, ...]]] = []
    current: list | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", line)
        if match and not raw.startswith((" ", "\t")):
            current = [canonical(match.group(1)), match.group(3), None, []]
            entries.append(current)  # type: ignore[arg-type]
            continue
        if current is None:
            continue
        for digest in re.findall(r"--hash=(sha256:[0-9a-f]{64})", line):
            current[3].append(digest)
        if line.startswith("# from "):
            current[2] = line[len("# from ") :].strip()
    return [(name, version, index, tuple(sorted(hashes))) for name, version, index, hashes in entries]


def compile_layer(
    requirements: tuple[str, ...],
    constraints: tuple[str, ...],
    *,
    python: str,
    index: str,
    extra_indexes: tuple[str, ...] = (),
    find_links: str | None = None,
    preferences: tuple[str, ...] = (),
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    if not requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="envbuild-lock-") as workdir:
        paths = {}
        for name, lines in (
            ("requirements.in", requirements),
            ("constraints.txt", constraints),
            ("requirements.txt", preferences),
        ):
            paths[name] = os.path.join(workdir, name)
            with open(paths[name], "w", encoding="utf-8") as handle:
                handle.writelines(f"{line}\n" for line in lines)
        command = [
            uv_binary(),
            "pip",
            "compile",
            paths["requirements.in"],
            "-c",
            paths["constraints.txt"],
            "-o",
            paths["requirements.txt"],
            "--python-platform",
            UV_PLATFORM,
            "--python-version",
            python,
            "--generate-hashes",
            "--emit-index-annotation",
            "--no-header",
            "--quiet",
            "--index-url",
            index,
        ]
        for url in extra_indexes:
            command += ["--extra-index-url", url]
        if find_links:
            command += ["--find-links", find_links]
        if upgrade:
            command.append("--upgrade")
        for package in upgrade_packages:
            command += ["--upgrade-package", package]
        env = {**os.environ, "UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            detail = "\n    ".join(done.stderr.strip().splitlines()[-12:])
            raise EnvbuildError(
                f"the resolver found no set of versions for {', '.join(requirements)}:\n    {detail}",
                fix="relax the pins named above, or check the index is reachable",
            )
        with open(paths["requirements.txt"], encoding="utf-8") as handle:
            return parse_compiled(handle.read())


def _pins(packages: tuple[LockedPackage, ...], layer: str) -> tuple[str, ...]:
    return tuple(f"{p.name}=={p.version}" for p in packages if p.layer == layer)


def lock_target(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    *,
    base_image: str | None = None,
    previous: LockedTarget | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
) -> LockedTarget:
    from envbuild.oci.registry import pinned
    from envbuild.render.plan import build_plan

    plan = build_plan(matrix, spec, target, base_image=base_image)
    framework: list[LockedPackage] = []
    keep = previous.packages if previous and not upgrade else ()
    if plan.strategy != "conda":  # conda-forge installs the framework; its solve is not locked here
        for name, version, index, hashes in compile_layer(
            plan.framework_requirements,
            plan.constraints,
            python=plan.python,
            index=plan.framework_index,
            find_links=plan.framework_find_links,
            preferences=_pins(keep, "framework"),
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
        ):
            framework.append(LockedPackage(name, version, "framework", index or plan.framework_index, hashes))
    in_framework = {p.name for p in framework}
    user: list[LockedPackage] = []
    constraints = tuple(f"{p.name}=={p.version}" for p in framework) + plan.constraints
    for name, version, index, hashes in compile_layer(
        plan.pip,
        constraints,
        python=plan.python,
        index=plan.index_url,
        extra_indexes=plan.extra_index_urls,
        preferences=_pins(keep, "user"),
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
    ):
        if name not in in_framework:
            user.append(LockedPackage(name, version, "user", index or plan.index_url, hashes))
    packages = tuple(sorted(framework, key=lambda p: p.name)) + tuple(sorted(user, key=lambda p: p.name))
    stack = tuple(
        sorted((k, str(v)) for k, v in plan.stack_document.items() if k in STACK_KEYS and v is not None)
    )
    requirements = (*plan.framework_requirements, *plan.pip)
    return LockedTarget(
        target.name, plan.strategy, plan.python, pinned(plan.base_image), requirements, stack, packages
    )


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


def lock_spec(
    matrix: Matrix,
    spec: Spec,
    *,
    target_name: str | None = None,
    base_image: str | None = None,
    previous: Lock | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
) -> Lock:
    chosen = spec.target(target_name)
    locked: dict[str, LockedTarget] = {}
    if previous is not None and target_name is not None:  # keep the targets not relocked
        locked.update({t.name: t for t in previous.targets if t.name in {x.name for x in spec.targets}})
    for target in chosen:
        before = previous.target(target.name) if previous else None
        locked[target.name] = lock_target(
            matrix,
            spec,
            target,
            base_image=base_image,
            previous=before,
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
        )
    order = [t.name for t in spec.targets]
    return Lock(__version__, spec.digest, matrix.digest, tuple(locked[n] for n in order if n in locked))


# ---------------------------------------------------------------------------------------------
# the file: a small TOML writer for a fixed shape, so the bytes are ours to keep stable


def _q(value: str) -> str:
    import json

    return json.dumps(value)  # a TOML basic string for everything we write (no control characters)


def _body(lock: Lock) -> str:
    out = [
        f"lock-version = {LOCK_VERSION}",
        f"envbuild = {_q(lock.envbuild)}",
        f"spec-digest = {_q('sha256:' + lock.spec_digest)}",
        f"matrix-digest = {_q('sha256:' + lock.matrix_digest)}",
    ]
    for target in lock.targets:
        out += [
            "",
            "[[target]]",
            f"name = {_q(target.name)}",
            f"strategy = {_q(target.strategy)}",
            f"python = {_q(target.python)}",
            f"base-image = {_q(target.base_image)}",
            "requirements = [" + ", ".join(_q(r) for r in target.requirements) + "]",
            "",
            "[target.stack]",
        ]
        out += [f"{key.replace('_', '-')} = {_q(value)}" for key, value in target.stack]
        for package in target.packages:
            out += [
                "",
                "[[target.package]]",
                f"name = {_q(package.name)}",
                f"version = {_q(package.version)}",
                f"layer = {_q(package.layer)}",
                f"index = {_q(package.index)}",
                "hashes = [",
            ]
            out += [f"    {_q(h)}," for h in package.hashes]
            out.append("]")
    return "\n".join(out) + "\n"


def dumps(lock: Lock) -> str:
    body = _body(lock)
    digest = hashlib.sha256(body.encode()).hexdigest()
    return f"{HEADER}content-digest = {_q('sha256:' + digest)}\n{body}"


def write_lock(path: str, lock: Lock) -> None:
    from envbuild._util.files import write_atomic

    write_atomic(path, dumps(lock))


def load_lock(path: str) -> tuple[Lock, bool]:
    """The lock and whether its content digest still matches (False: edited by hand)."""
    from envbuild._util import toml as _toml

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise LockError(
            f"{path} does not exist", fix="run `envbuild lock` and commit envbuild.lock"
        ) from None
    try:
        data = _toml.loads(text)
        lock = _from_data(data)
    except (_toml.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
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
            LockedPackage(p["name"], p["version"], p["layer"], p["index"], tuple(p["hashes"]))
            for p in t.get("package", [])
        )
        for package in packages:
            if package.layer not in ("framework", "user") or not package.hashes:
                raise ValueError(f"package {package.name} needs a layer and at least one hash")
        stack = tuple(sorted((k.replace("-", "_"), str(v)) for k, v in t["stack"].items()))
        targets.append(
            LockedTarget(
                t["name"],
                t["strategy"],
                t["python"],
                t["base-image"],
                tuple(t["requirements"]),
                stack,
                packages,
            )
        )
    return Lock(
        data["envbuild"],
        data["spec-digest"].removeprefix("sha256:"),
        data["matrix-digest"].removeprefix("sha256:"),
        tuple(targets),
    )


# ---------------------------------------------------------------------------------------------
# drift: what --check and a relock report


def check_lock(lock: Lock, intact: bool, spec: Spec, matrix: Matrix) -> list[str]:
    """Every reason the lock no longer describes spec + matrix; empty when it does."""
    from envbuild.render.plan import build_plan

    problems = []
    if not intact:
        problems.append("envbuild.lock was edited by hand (its content digest does not match)")
    spec_changed = lock.spec_digest != spec.digest
    matrix_changed = lock.matrix_digest != matrix.digest
    if spec_changed:
        problems.append(
            f"{os.path.basename(spec.path)} changed since the lock "
            f"(sha256 {lock.spec_digest[:12]} -> {spec.digest[:12]})"
        )
    if matrix_changed:
        problems.append(
            f"the compatibility matrix changed since the lock "
            f"(sha256 {lock.matrix_digest[:12]} -> {matrix.digest[:12]})"
        )
    if spec_changed or matrix_changed:
        names = {t.name for t in spec.targets}
        for locked in lock.targets:
            if locked.name not in names:
                problems.append(f"target {locked.name!r} is locked but no longer in the spec")
        for target in spec.targets:
            locked = lock.target(target.name)
            if locked is None:
                problems.append(f"target {target.name!r} is in the spec but not locked")
                continue
            try:
                plan = build_plan(matrix, spec, target)
            except EnvbuildError as exc:
                problems.append(f"target {target.name!r} no longer resolves: {exc.message}")
                continue
            problems += _target_drift(locked, plan)
    return problems


def _target_drift(locked: LockedTarget, plan: Plan) -> list[str]:
    found = []
    now = dict((k, str(v)) for k, v in plan.stack_document.items() if k in STACK_KEYS and v is not None)
    for key, value in locked.stack:
        if now.get(key) != value:
            found.append(f"target {locked.name!r}: {key} {value} -> {now.get(key)}")
    wanted = (*plan.framework_requirements, *plan.pip)
    for requirement in sorted(set(wanted) - set(locked.requirements)):
        found.append(f"target {locked.name!r}: requirement added: {requirement}")
    for requirement in sorted(set(locked.requirements) - set(wanted)):
        found.append(f"target {locked.name!r}: requirement removed: {requirement}")
    if plan.python != locked.python:
        found.append(f"target {locked.name!r}: python {locked.python} -> {plan.python}")
    return found


def relock_summary(old: Lock | None, new: Lock) -> list[str]:
    lines = []
    for target in new.targets:
        before = old.target(target.name) if old else None
        if before is None:
            lines.append(f"{target.name}: locked {len(target.packages)} packages, base {target.base_image}")
            continue
        was = {p.name: p.version for p in before.packages}
        now = {p.name: p.version for p in target.packages}
        added = [f"+{n} {now[n]}" for n in sorted(set(now) - set(was))]
        removed = [f"-{n} {was[n]}" for n in sorted(set(was) - set(now))]
        changed = [f"{n} {was[n]} -> {now[n]}" for n in sorted(set(was) & set(now)) if was[n] != now[n]]
        parts = added + removed + changed
        lines.append(f"{target.name}: " + (", ".join(parts) if parts else "packages unchanged"))
        if before.base_image != target.base_image:
            lines.append(f"{target.name}: base {before.base_image} -> {target.base_image}")
    return lines


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


def export_pylock(target: LockedTarget) -> str:
    """PEP 751 `pylock.<target>.toml`: the locked versions, with each wheel's URL, size and hash.

    uv writes the artifacts: it is given the exact locked pins (no dependency resolution) per index
    the lock recorded, and envbuild adds each package's `index` and checks the versions came back as
    locked.
    """
    by_index: dict[str, list[LockedPackage]] = {}
    for package in target.packages:
        by_index.setdefault(package.index, []).append(package)
    blocks: list[str] = []
    for index, packages in sorted(by_index.items()):
        with tempfile.TemporaryDirectory(prefix="envbuild-pylock-") as workdir:
            pins = os.path.join(workdir, "pins.txt")
            output = os.path.join(workdir, "pylock.toml")
            with open(pins, "w", encoding="utf-8") as handle:
                handle.writelines(f"{p.name}=={p.version}\n" for p in packages)
            command = [
                uv_binary(),
                "pip",
                "compile",
                pins,
                "--no-deps",
                "--format",
                "pylock.toml",
                "-o",
                output,
                "--python-platform",
                UV_PLATFORM,
                "--python-version",
                target.python,
                "--no-header",
                "--quiet",
                "--index-url",
                index,
            ]
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"},
            )
            if done.returncode != 0:
                raise EnvbuildError(
                    f"exporting {target.name} to PEP 751 failed: {done.stderr.strip()[-500:]}",
                    fix="check the index recorded in envbuild.lock is reachable",
                )
            with open(output, encoding="utf-8") as handle:
                text = handle.read()
        for block in text.split("\n[[packages]]\n")[1:]:
            name = re.search(r'^name = "([^"]+)"', block, re.M)
            version = re.search(r'^version = "([^"]+)"', block, re.M)
            locked = {p.name: p.version for p in packages}
            if not name or not version or locked.get(canonical(name.group(1))) != version.group(1):
                raise EnvbuildError(
                    f"uv exported {block.splitlines()[0]} for {target.name}, not the locked version"
                )
            blocks.append(
                block.rstrip("\n").replace(
                    f'version = "{version.group(1)}"',
                    f'version = "{version.group(1)}"\nindex = {_q(index)}',
                    1,
                )
            )
    blocks.sort(key=lambda b: b.split("\n", 1)[0])
    header = [
        'lock-version = "1.0"',
        f"created-by = {_q('envbuild')}",
        f"requires-python = {_q('==' + target.python + '.*')}",
        "environments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]",
    ]
    return "\n".join(header) + "\n" + "".join(f"\n[[packages]]\n{b}\n" for b in blocks)


def pylock_name(target: str) -> str:
    """PEP 751 names have no dots: pylock.<name>.toml."""
    return f"pylock.{target.replace('.', '-')}.toml"
