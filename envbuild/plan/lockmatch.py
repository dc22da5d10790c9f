"""Whether a lock still says what the spec and the matrix imply for each target, and the lock
render and build may use: sealed (lockfile.seal), made for this spec and matrix, and consistent.

A lock that passes its seal can still be a forgery whose digest was recomputed. What the spec and
matrix determine (the targets, the stack, the framework pin, which layer a direct requirement is
in, the indexes, the base repository) is re-derived here and compared, offline, on every render
and build; `envbuild lock --check` adds a full re-resolution (envbuild.lock.locker).
"""

from __future__ import annotations

import os

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import LockError
from envbuild.lockfile.model import Lock, LockedTarget, canonical, lock_path
from envbuild.lockfile.problem import Problem, drift_recorder
from envbuild.lockfile.read import STACK_KEYS, read_lock
from envbuild.lockfile.seal import judge_seal
from envbuild.plan.strategy import strategy_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from envbuild.plan.plan import Plan
    from envbuild.spec.model import Spec

FIX = "run `envbuild lock` and commit envbuild.lock"


def stack_facts(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The stack facts a lock records for a plan (STACK_KEYS), as sorted (key, text) pairs."""
    document = plan.stack_document
    return tuple(sorted((k, str(v)) for k, v in document.items() if k in STACK_KEYS and v is not None))


def _same_url(a: str, b: str | None) -> bool:
    return b is not None and a.rstrip("/") == b.rstrip("/")


def lock_drift(locked: LockedTarget, plan: Plan) -> list[str]:
    """Every way the locked target differs from what the spec and matrix imply; empty when none."""
    return [found.message for found in drift_problems(locked, plan)]


def drift_problems(
    locked: LockedTarget, plan: Plan, platforms: tuple[str, ...] | None = None
) -> list[Problem]:
    """lock_drift as records (kind "drift"): the field, package, locked and wanted values of each.
    `platforms`: those the target is built for (None: just this entry's), so a message about one
    entry of a multi-platform target names its platform."""
    from packaging.requirements import Requirement

    found: list[Problem] = []
    drift = drift_recorder(locked.name, locked.platform, platforms or (locked.platform,), found)
    if locked.strategy != plan.strategy:
        drift(f"strategy {locked.strategy} -> {plan.strategy}", "strategy", locked.strategy, plan.strategy)
    if locked.python != plan.python:
        drift(f"python {locked.python} -> {plan.python}", "python", locked.python, plan.python)
    was, now = dict(locked.stack), dict(stack_facts(plan))
    for key in sorted(set(was) | set(now)):
        if was.get(key) != now.get(key):
            drift(f"{key} {was.get(key)} -> {now.get(key)}", key, was.get(key), now.get(key))
    wanted = (*plan.framework_requirements, *plan.pip)
    for requirement in sorted(set(wanted) - set(locked.requirements)):
        drift(f"requirement added: {requirement}", "requirements", None, requirement)
    for requirement in sorted(set(locked.requirements) - set(wanted)):
        drift(f"requirement removed: {requirement}", "requirements", requirement, None)
    if set(wanted) == set(locked.requirements) and tuple(locked.requirements) != wanted:
        drift(
            "requirements are not in the order the spec gives them",
            "requirements",
            ", ".join(locked.requirements),
            ", ".join(wanted),
        )

    layers = {
        layer: {p.name: p for p in locked.packages if p.layer == layer} for layer in ("framework", "user")
    }
    framework_sources = (plan.framework_index, plan.framework_find_links)
    strategy = strategy_for(plan.strategy)
    if not strategy.pip_framework and layers["framework"]:
        drift(
            "strategy conda installs the framework from conda-forge; the lock has a framework layer",
            "layer",
            "framework",
            None,
        )
    for requirement in plan.framework_requirements if strategy.pip_framework else ():
        parsed = Requirement(requirement)
        package = layers["framework"].get(canonical(parsed.name))
        if package is None or not parsed.specifier.contains(package.version, prereleases=True):
            pinned = f"{package.name} {package.version}" if package else "nothing"
            drift(
                f"the framework layer must pin {requirement}, and pins {pinned}",
                "version",
                package.version if package else None,
                requirement,
                canonical(parsed.name),
            )
    for requirement in plan.pip:
        parsed = Requirement(requirement)
        key = canonical(parsed.name)
        package = layers["framework"].get(key) or layers["user"].get(key)
        if package is None:
            if parsed.marker is None:  # a marker may exclude it on the entry's platform
                drift(f"requirement {requirement} has no locked package", "version", None, requirement, key)
        elif not parsed.specifier.contains(package.version, prereleases=True):
            drift(
                f"requirement {requirement} is locked at {package.version}",
                "version",
                package.version,
                requirement,
                key,
            )
    for package in layers["framework"].values():
        if not any(_same_url(package.index, source) for source in framework_sources):
            drift(
                f"framework package {package.name} comes from {package.index}, "
                f"not the framework index {plan.framework_index}",
                "index",
                package.index,
                plan.framework_index,
                package.name,
            )
    user_indexes = (plan.index_url, *plan.extra_index_urls)
    for package in layers["user"].values():
        if not any(_same_url(package.index, source) for source in user_indexes):
            drift(
                f"package {package.name} comes from {package.index}, "
                f"not one of the spec's indexes ({', '.join(user_indexes)})",
                "index",
                package.index,
                ", ".join(user_indexes),
                package.name,
            )
    return found


def require_match(locked: LockedTarget, plan: Plan, path: str) -> None:
    """Refuse to render a target from a lock that no longer describes it. A conda target's lock
    must carry its conda layer: without one, the image would solve at build time, unlocked."""
    drift = lock_drift(locked, plan)
    if strategy_for(plan.strategy).conda_environment and not locked.conda:
        drift.append(
            f"target {locked.name!r}: the conda layer is not locked (a lock from before envbuild locked it)"
        )
    if drift:
        raise LockError(
            f"{path} does not describe what the spec and matrix give:\n  - " + "\n  - ".join(drift), fix=FIX
        )


def lock_for_render(
    spec: Spec,
    matrix_digest: str,
    *,
    key: bytes | None,
    allow_edited: bool,
    warn: Callable[[str], None],
) -> Lock | None:
    """envbuild.lock next to the spec, when there is one, as render and build may use it: every
    field valid, its seal intact (or overridden, loudly), made for this spec and matrix, and
    locking every target of the spec: a target it lacks is an error, not an unlocked build."""
    path = lock_path(spec.path)
    if not os.path.exists(path):
        if key is not None:
            raise LockError(f"{path} does not exist, and a lock key is set: builds must be locked", fix=FIX)
        return None
    read = read_lock(path)
    judge_seal(path, read.body, read.digest, read.hmac, key=key, allow_edited=allow_edited, warn=warn)
    lock = read.lock
    if lock.spec_digest != spec.digest or lock.matrix_digest != matrix_digest:
        raise LockError(
            f"{path} does not match {spec.path} and the matrix",
            fix="run `envbuild lock` (or remove envbuild.lock to render unlocked)",
        )
    missing = [t.name for t in spec.targets if lock.target(t.name) is None]
    extra = sorted({t.name for t in lock.targets} - {t.name for t in spec.targets})
    if missing or extra:
        detail = "; ".join(
            part
            for part in (
                f"no entry for target(s) {', '.join(missing)}" if missing else "",
                f"entries for target(s) {', '.join(extra)} the spec does not have" if extra else "",
            )
            if part
        )
        raise LockError(f"{path} does not lock the spec's targets: {detail}", fix=FIX)
    return lock
