"""`envbuild lock`: the whole stack of every target pinned in one byte-stable TOML file.

Per target: the resolved stack, the base image by digest, and the complete Python closure for linux
x86_64 at the target's Python (name, version, the index it came from, every sha256). The closure is
resolved by uv for the *target* platform (envbuild.lock.uv), in two layers that mirror the image: the
framework from its variant's index, then the user packages from the spec's index with the framework's
closure as constraints. The file format is envbuild.spec.lockfile.
"""

from __future__ import annotations

import os

from envbuild import __version__
from envbuild.errors import EnvbuildError
from envbuild.lock.uv import compile_layer
from envbuild.matrix.model import Matrix
from envbuild.oci.registry import pinned
from envbuild.render.plan import Plan, build_plan
from envbuild.spec.lockfile import (
    Lock,
    LockedPackage,
    LockedTarget,
    load_lock,
    load_previous,
    lock_path,
    write_lock,
)
from envbuild.spec.model import Spec, Target


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
            framework.append(
                LockedPackage(
                    name=name,
                    version=version,
                    layer="framework",
                    index=index or plan.framework_index,
                    hashes=hashes,
                )
            )
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
            user.append(
                LockedPackage(
                    name=name, version=version, layer="user", index=index or plan.index_url, hashes=hashes
                )
            )
    packages = tuple(sorted(framework, key=lambda p: p.name)) + tuple(sorted(user, key=lambda p: p.name))
    stack = tuple(
        sorted((k, str(v)) for k, v in plan.stack_document.items() if k in STACK_KEYS and v is not None)
    )
    requirements = (*plan.framework_requirements, *plan.pip)
    return LockedTarget(
        name=target.name,
        strategy=plan.strategy,
        python=plan.python,
        base_image=pinned(plan.base_image),
        requirements=requirements,
        stack=stack,
        packages=packages,
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
    return Lock(
        envbuild=__version__,
        spec_digest=spec.digest,
        matrix_digest=matrix.digest,
        targets=tuple(locked[n] for n in order if n in locked),
    )


def relock(
    matrix: Matrix,
    spec: Spec,
    *,
    target_name: str | None = None,
    base_image: str | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
) -> tuple[Lock | None, Lock, str]:
    """`envbuild lock`: lock the spec (keeping the previous lock's pins unless upgrading) and write
    envbuild.lock next to it. (previous lock or None, new lock, its path)."""
    path = lock_path(spec.path)
    previous = load_previous(path)
    lock = lock_spec(
        matrix,
        spec,
        target_name=target_name,
        base_image=base_image,
        previous=previous,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
    )
    write_lock(path, lock)
    return previous, lock, path


def check_lock_file(spec: Spec, matrix: Matrix) -> tuple[Lock, list[str], str]:
    """`envbuild lock --check`: the lock next to the spec, every reason it no longer matches, its path."""
    path = lock_path(spec.path)
    lock, intact = load_lock(path)
    return lock, check_lock(lock, intact, spec, matrix), path


def check_lock(lock: Lock, intact: bool, spec: Spec, matrix: Matrix) -> list[str]:
    """Every reason the lock no longer describes spec + matrix; empty when it does."""
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
