"""`envbuild lock`: the whole stack of every target pinned in one byte-stable TOML file.

Per target and platform (envbuild.resolve.platform_choice: linux/amd64, linux/arm64 or both): the
resolved stack, the base image by the digest of that platform's manifest, and the complete Python
closure for that platform at the target's Python (name, version, the index it came from, every
sha256). Each platform is its own `[[target]]` entry, because wheels, hashes and marker-gated
dependencies differ between x86_64 and aarch64. The closure is resolved by uv for the *target*
platform (envbuild.lock.uv), in two layers that mirror the image: the framework from its variant's
index, then the user packages from the spec's index with the framework's closure as constraints.
The file format is envbuild.lockfile.model.
"""

from __future__ import annotations

import difflib
import os

from envbuild import __version__
from envbuild._util.progress import SILENT, Progress
from envbuild.errors import EnvbuildError, LockError, UsageError
from envbuild.lock.condalayer import conda_changes, conda_drift, conda_package_drift, lock_conda, spec_name
from envbuild.lock.uv import compile_layer
from envbuild.lockfile.model import (
    Lock,
    LockedCondaPackage,
    LockedMirror,
    LockedPackage,
    LockedTarget,
    canonical,
    dumps,
    lock_path,
    write_lock,
)
from envbuild.lockfile.problem import Problem, platform_suffix, problem
from envbuild.lockfile.read import load_previous, lock_from_data, read_lock
from envbuild.lockfile.seal import seal_problems
from envbuild.matrix.model import Matrix
from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import PlatformMissing, pinned
from envbuild.plan.builds import TargetBuild, builds, by_target
from envbuild.plan.lockmatch import drift_problems, stack_facts
from envbuild.plan.plan import Plan, build_plan
from envbuild.plan.strategy import strategy_for
from envbuild.spec.mirrors import Mirrors
from envbuild.spec.model import Spec


def _pins(packages: tuple[LockedPackage, ...], layer: str) -> tuple[str, ...]:
    return tuple(f"{p.name}=={p.version}" for p in packages if p.layer == layer)


def _counted(packages: tuple[LockedPackage, ...] | list[LockedPackage]) -> str:
    return f"{len(packages)} package" + ("" if len(packages) == 1 else "s")


def _framework_detail(plan: Plan, framework: list[LockedPackage]) -> str:
    """`torch 2.13.0, 12 packages`: the framework as locked, then the layer's size."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        wanted = canonical(Requirement(plan.framework_requirements[0]).name)
    except (IndexError, InvalidRequirement):
        wanted = ""
    found = next((f"{p.name} {p.version}, " for p in framework if p.name == wanted), "")
    return found + _counted(framework)


def lock_packages(
    plan: Plan,
    *,
    keep: tuple[LockedPackage, ...] = (),
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    progress: Progress = SILENT,
    platforms: tuple[str, ...] | None = None,
) -> tuple[LockedPackage, ...]:
    """A plan's Python closure for the plan's platform in two layers, preferring the `keep` pins:
    the framework from its variant's index, then the user packages against the framework's pins.
    Each layer is a step of `progress`, and is named in uv's errors (with the platform, when the
    target has `platforms` other than linux/amd64 alone)."""
    framework: list[LockedPackage] = []
    where = f"target {plan.target}" + platform_suffix(plan.platform, platforms or (plan.platform,))
    if strategy_for(plan.strategy).pip_framework:  # else conda-forge's solve, the conda layer, has it
        step = progress.begin(f"{where}: framework layer")
        for name, version, index, hashes in compile_layer(
            plan.framework_requirements,
            plan.constraints,
            python=plan.python,
            index=plan.mirrored_framework_index,  # resolved through the mirror, recorded canonical
            find_links=plan.mirrored_find_links,
            preferences=_pins(keep, "framework"),
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
            during=f"locking {where}, framework layer",
            platform=plan.platform,
        ):
            framework.append(
                LockedPackage(
                    name=name,
                    version=version,
                    layer="framework",
                    index=plan.mirrors.canonical_url(index) if index else plan.framework_index,
                    hashes=hashes,
                )
            )
        step.done(_framework_detail(plan, framework))
    in_framework = {p.name for p in framework}
    user: list[LockedPackage] = []
    constraints = tuple(f"{p.name}=={p.version}" for p in framework) + plan.constraints
    step = progress.begin(f"{where}: user layer")
    for name, version, index, hashes in compile_layer(
        plan.pip,
        constraints,
        python=plan.python,
        index=plan.mirrored_index_url,
        extra_indexes=plan.mirrored_extra_index_urls,
        preferences=_pins(keep, "user"),
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        during=f"locking {where}, user layer",
        platform=plan.platform,
    ):
        if name not in in_framework:
            user.append(
                LockedPackage(
                    name=name,
                    version=version,
                    layer="user",
                    index=plan.mirrors.canonical_url(index) if index else plan.index_url,
                    hashes=hashes,
                )
            )
    step.done(_counted(user))
    return tuple(sorted(framework, key=lambda p: p.name)) + tuple(sorted(user, key=lambda p: p.name))


def locked_target(
    plan: Plan,
    base_image: str,
    packages: tuple[LockedPackage, ...],
    conda: tuple[LockedCondaPackage, ...] = (),
) -> LockedTarget:
    return LockedTarget(
        name=plan.target,
        platform=plan.platform,
        strategy=plan.strategy,
        python=plan.python,
        base_image=base_image,
        requirements=(*plan.framework_requirements, *plan.pip),
        stack=stack_facts(plan),
        packages=packages,
        conda=conda,
    )


def lock_target(
    matrix: Matrix,
    spec: Spec,
    build: TargetBuild,
    *,
    base_image: str | None = None,
    previous: LockedTarget | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    progress: Progress = SILENT,
) -> LockedTarget:
    """Lock one build (a target on one platform): that platform's closure, preferring the
    `previous` entry's pins, and its base image pinned to that platform's manifest."""
    platforms = build.platforms
    plan = build_plan(matrix, spec, build.target, base_image=base_image, platform=build.platform)
    where = build.target.name + platform_suffix(plan.platform, platforms)
    keep = previous.packages if previous and not upgrade else ()
    packages = lock_packages(
        plan,
        keep=keep,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        progress=progress,
        platforms=platforms,
    )
    conda = lock_conda(
        plan,
        spec.packages.conda_channels,
        keep=previous.conda if previous and not upgrade else (),
        upgrade_packages=upgrade_packages,
        progress=progress,
        where=f"target {where}",
    )
    step = progress.begin(f"target {where}: locked", f"pinning the base image of target {where}")
    try:
        base = _pinned_canonical(plan)
    except PlatformMissing as exc:
        raise LockError(
            f"target {where}: base image {exc.message}",
            fix=f"{exc.fix} (--base-image, or the target's base-image in the spec)",
        ) from None
    step.done(f"{_counted(packages)}, base {_short(base)}")
    return locked_target(plan, base, packages, conda)


def _pinned_canonical(plan: Plan) -> str:
    """The plan's base pinned by digest, named as the spec or the matrix name it (canonical): the digest
    is looked up through its mirror, and is the same on the canonical registry (a mirror serves the
    same manifests), so a lock made behind a mirror is byte for byte the one made without."""
    if plan.mirrors.image_entry(plan.base_image) is None:
        return pinned(plan.base_image, platform=plan.platform)
    named = parse_reference(plan.base_image)
    if named.digest:
        return plan.base_image.strip()
    digest = parse_reference(pinned(plan.mirrored_base_image, platform=plan.platform)).digest
    return f"{named.name}:{named.tag}@{digest}"


def _short(image: str) -> str:
    """`debian:bookworm-slim@sha256:0123456789ab`: a progress line shows 12 digits of the digest."""
    name, at, digest = image.partition("@sha256:")
    return f"{name}{at}{digest[:12]}" if at else image


def lock_spec(
    matrix: Matrix,
    spec: Spec,
    *,
    target_name: str | None = None,
    base_image: str | None = None,
    previous: Lock | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    progress: Progress = SILENT,
) -> Lock:
    """Each chosen target locked once per platform, in the spec's order and then the platforms'.
    With `target_name`, the other targets keep their `previous` entries. A platform the previous
    lock lacks (one just added) prefers the pins of the target's other platform, so the
    platforms stay on the same versions where their wheels allow."""
    chosen = by_target(builds(matrix, spec, only=target_name))
    entries: list[LockedTarget] = []
    for target in spec.targets:
        group = chosen.get(target.name)
        if group is None:  # not relocked: kept as it was (only with target_name)
            entries += [t for t in previous.targets if t.name == target.name] if previous else []
            continue
        done: list[LockedTarget] = []
        for build in group:
            before = previous.target(target.name, build.platform) if previous else None
            if before is None:
                before = done[0] if done else (previous.target(target.name) if previous else None)
            done.append(
                lock_target(
                    matrix,
                    spec,
                    build,
                    base_image=base_image,
                    previous=before,
                    upgrade=upgrade,
                    upgrade_packages=upgrade_packages,
                    progress=progress,
                )
            )
        entries += done
    return Lock(
        envbuild=__version__,
        spec_digest=spec.digest,
        matrix_digest=matrix.digest,
        targets=tuple(entries),
        mirrors=mirrors_used(tuple(entries), spec.mirrors),
    )


def mirrors_used(targets: tuple[LockedTarget, ...], mirrors: Mirrors) -> tuple[LockedMirror, ...]:
    """The [mirrors] entries the canonical sources of `targets` go through (package indexes, conda
    channels and files, base images), by source: the lock's `[[mirror]]` list."""
    used: dict[str, str] = {}
    for target in targets:
        entries = [mirrors.image_entry(target.base_image)]
        entries += [mirrors.url_entry(p.index) for p in target.packages]
        entries += [mirrors.url_entry(url) for p in target.conda for url in (p.channel, p.url)]
        used.update((e.source, e.mirror) for e in entries if e is not None)
    return tuple(LockedMirror(source=source, mirror=used[source]) for source in sorted(used))


def mirror_note(lock: Lock, mirrors: Mirrors) -> str | None:
    """A line for `lock --check` when the spec's mirrors now differ from those the lock was made
    through: it still checks (its sources are canonical), but the reader should know; None when not."""
    now = mirrors_used(lock.targets, mirrors)
    if now == lock.mirrors:
        return None

    def listed(entries: tuple[LockedMirror, ...]) -> str:
        return ", ".join(f"{m.source} -> {m.mirror}" for m in entries) or "no mirror"

    return f"the lock was made through {listed(lock.mirrors)}; the spec's [mirrors] now give {listed(now)}"


def relock(
    matrix: Matrix,
    spec: Spec,
    *,
    target_name: str | None = None,
    base_image: str | None = None,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    key: bytes | None = None,
    progress: Progress = SILENT,
) -> tuple[Lock | None, Lock, str]:
    """`envbuild lock`: lock the spec (keeping the previous lock's pins unless upgrading) and write
    envbuild.lock next to it, sealed with `key` when one is set; a line per layer and target on
    `progress`. (previous lock or None, new lock, path).

    Without --upgrade, a lock that is `up_to_date` is returned as it is, nothing resolved and
    nothing written: then the previous lock *is* the new one (`previous is new`)."""
    path = lock_path(spec.path)
    if not upgrade and not upgrade_packages:
        current = up_to_date(matrix, spec, target_name=target_name, base_image=base_image, key=key)
        if current is not None:
            return current, current, path
    previous = load_previous(path)
    if upgrade_packages and previous is not None:  # before any resolution: a typo fails at once
        _refuse_unknown_upgrades(upgrade_packages, _lock_names(previous) | _direct_names(spec), path)
    lock = lock_spec(
        matrix,
        spec,
        target_name=target_name,
        base_image=base_image,
        previous=previous,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        progress=progress,
    )
    if upgrade_packages and previous is None:  # nothing was locked: the closure just resolved decides
        _refuse_unknown_upgrades(upgrade_packages, _lock_names(lock) | _direct_names(spec), path)
    refuse_unreadable(lock, path)
    try:
        write_lock(path, lock, key)
    except OSError as exc:
        raise UsageError(
            f"cannot write {path} ({exc.strerror or exc})",
            fix="run `envbuild lock` where the spec's directory is writable and its filesystem has space",
        ) from None
    return previous, lock, path


def refuse_unreadable(lock: Lock, path: str) -> None:
    """The lock about to be written, read back by the readers' own validator (lockfile.read.lock_from_data):
    `lock` never writes a file that `render` and `lock --check` refuse, whose fix (relock) would
    write the same file again (issue 33). A LockError naming the field; nothing is written."""
    from envbuild._util import toml

    try:
        lock_from_data(toml.loads(dumps(lock)))
    except ValueError as exc:
        raise LockError(
            f"{path} was not written: what was locked is refused by envbuild's own lock reader: {exc}",
            fix="an index or channel answered something envbuild will not lock; the message names the "
            "package: pin another version, or use another index or mirror",
        ) from None


def up_to_date(
    matrix: Matrix,
    spec: Spec,
    *,
    target_name: str | None = None,
    base_image: str | None = None,
    key: bytes | None = None,
) -> Lock | None:
    """The lock next to the spec when `envbuild lock` has nothing to change in it, else None.

    Decided offline, from the files alone, so an unchanged project relocks in the time it takes to
    read them: the lock reads strictly; its seal holds (with a key, its HMAC too); this envbuild
    wrote it; and `check_lock_file(offline=True)` finds no problem in any target (spec and matrix
    digests, targets, stack, Python, strategy, requirements, framework pin, indexes, and the base
    image against the spec, the matrix and `base_image`). What that cannot see: a newer release an
    unpinned requirement allows, a base tag moved in its registry, or a hash forged with the digest
    recomputed and no key set; the first two are what `--upgrade` is for, the last what
    `lock --check` and the lock key are for. Any doubt (no lock, an unreadable one) is None: relock.
    """
    spec.target(target_name)  # a --target the spec lacks is exit 2, up to date or not
    if not os.path.isfile(lock_path(spec.path)):
        return None
    try:
        current, problems, _ = check_lock_file(spec, matrix, key=key, base_image=base_image, offline=True)
    except EnvbuildError:  # unreadable or malformed: relocking replaces it, as it always has
        return None
    if problems or current.envbuild != __version__:
        return None
    return current


def _lock_names(lock: Lock) -> set[str]:
    return {p.name for t in lock.targets for p in t.packages} | {
        canonical(p.name) for t in lock.targets for p in t.conda
    }


def _direct_names(spec: Spec) -> set[str]:
    """The canonical names the spec itself asks for: its pip requirements, each target's framework,
    and its conda packages."""
    from packaging.requirements import InvalidRequirement, Requirement

    names = {canonical(spec_name(text)) for text in spec.packages.conda}
    for text in (*spec.packages.pip, *(t.stack.framework for t in spec.targets)):
        try:
            names.add(canonical(Requirement(text).name))
        except InvalidRequirement:  # a framework text the plan resolves ("tf"); never an upgrade name
            continue
    return names


def _refuse_unknown_upgrades(names: tuple[str, ...], known: set[str], path: str) -> None:
    """`--upgrade PKG` for a package neither the lock nor the spec holds would upgrade nothing and
    say "unchanged": a typo that looks like success. Refuse it, naming the package."""
    unknown = [name for name in names if canonical(name) not in known]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(canonical(name), sorted(known), n=3, cutoff=0.6)
        hints.append(f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    raise UsageError(
        f"--upgrade {', '.join(hints)}: not a package of {path} or of the spec",
        fix="name packages the lock holds (`grep 'name = ' envbuild.lock`), or give --upgrade no names "
        "to upgrade everything",
    )


def check_lock_file(
    spec: Spec,
    matrix: Matrix,
    *,
    key: bytes | None = None,
    base_image: str | None = None,
    offline: bool = False,
    target_name: str | None = None,
    progress: Progress = SILENT,
) -> tuple[Lock, list[Problem], str]:
    """`envbuild lock --check`: the lock next to the spec, every reason it is not the lock
    `envbuild lock` would write now, and its path. With `target_name`, only that target's stack and
    packages are checked (the seal and the digests still are: they cover the whole file); a name
    the spec lacks is a UsageError listing the spec's targets.

    Three layers, each catching what the one before cannot: the seal (an edit made without
    envbuild; with a key, an edit made without the key), what the spec and matrix imply (a forgery
    of the stack, the targets, the framework pin or the base repository, digest recomputed), and,
    unless offline, a re-resolution with the lock's own pins preferred, compared byte for byte (a
    forged hash, version, package or layer)."""
    chosen = spec.target(target_name)  # a --target the spec lacks: exit 2 before the lock is read
    path = lock_path(spec.path)
    read = read_lock(path)
    problems = [problem("seal", text) for text in seal_problems(path, read.body, read.digest, read.hmac, key)]
    checked = check_lock(
        read.lock,
        spec,
        matrix,
        base_image=base_image,
        offline=offline,
        only=None if target_name is None else {t.name for t in chosen},
        progress=progress,
    )
    return read.lock, problems + checked, path


def check_lock(
    lock: Lock,
    spec: Spec,
    matrix: Matrix,
    *,
    base_image: str | None = None,
    offline: bool = False,
    only: set[str] | None = None,
    progress: Progress = SILENT,
) -> list[Problem]:
    """Every reason the lock does not describe spec + matrix; empty when it does. `only`: check the
    targets of these names, and no others. The re-resolution (not offline) reports each layer and
    target on `progress`."""
    problems = []
    if lock.spec_digest != spec.digest:
        problems.append(
            problem(
                "spec",
                f"{os.path.basename(spec.path)} changed since the lock "
                f"(sha256 {lock.spec_digest[:12]} -> {spec.digest[:12]})",
                field="spec-digest",
                locked=lock.spec_digest,
                wanted=spec.digest,
            )
        )
    if lock.matrix_digest != matrix.digest:
        problems.append(
            problem(
                "matrix",
                f"the compatibility matrix changed since the lock "
                f"(sha256 {lock.matrix_digest[:12]} -> {matrix.digest[:12]})",
                field="matrix-digest",
                locked=lock.matrix_digest,
                wanted=matrix.digest,
            )
        )
    wanted = by_target(builds(matrix, spec))  # the spec's platforms: the lock is checked against them
    wanted_platforms = {name: group[0].platforms for name, group in wanted.items()}
    gone: set[str] = set()
    for locked in lock.targets:
        if locked.name not in wanted_platforms:
            if only is None and locked.name not in gone:
                gone.add(locked.name)
                problems.append(
                    problem(
                        "target",
                        f"target {locked.name!r} is locked but no longer in the spec",
                        target=locked.name,
                        locked=locked.name,
                    )
                )
        elif locked.platform not in wanted_platforms[locked.name] and (only is None or locked.name in only):
            problems.append(
                problem(
                    "target",
                    f"target {locked.name!r} is locked for {locked.platform}, which the spec no longer "
                    f"builds it for (it gives {', '.join(wanted_platforms[locked.name])})",
                    target=locked.name,
                    platform=locked.platform,
                    field="platform",
                    locked=locked.platform,
                )
            )
    relocked: list[LockedTarget] = []
    for target in spec.targets:
        if only is not None and target.name not in only:
            # not checked: kept as locked, so the byte comparison ignores it
            relocked += [t for t in lock.targets if t.name == target.name]
            continue
        if not lock.platforms(target.name):
            problems.append(
                problem(
                    "target",
                    f"target {target.name!r} is in the spec but not locked",
                    target=target.name,
                    wanted=target.name,
                )
            )
            continue
        for build in wanted[target.name]:
            platform, platforms = build.platform, build.platforms
            where = f"target {target.name!r}" + platform_suffix(platform, platforms)
            locked = lock.target(target.name, platform)
            if locked is None:
                problems.append(
                    problem(
                        "target",
                        f"target {target.name!r} is in the spec for {platform} but not locked for it "
                        f"(locked for {', '.join(lock.platforms(target.name))})",
                        target=target.name,
                        platform=platform,
                        field="platform",
                        wanted=platform,
                    )
                )
                continue
            try:
                plan = build_plan(matrix, spec, target, base_image=base_image, lock=locked)
            except EnvbuildError as exc:
                message = f"{where}: {exc.message}"
                problems.append(problem("unresolvable", message, target=target.name, platform=platform))
                continue
            drift = drift_problems(locked, plan, platforms)
            drift += conda_drift(locked, plan, spec.packages.conda_channels, platforms)
            problems += drift
            if not offline and not drift:
                packages = lock_packages(plan, keep=locked.packages, progress=progress, platforms=platforms)
                conda = lock_conda(
                    plan,
                    spec.packages.conda_channels,
                    keep=locked.conda,
                    progress=progress,
                    where=f"target {target.name}" + platform_suffix(platform, platforms),
                )
                relocked.append(locked_target(plan, locked.base_image, packages, conda))
                label = target.name + platform_suffix(platform, platforms)
                progress.begin(f"target {label}: re-resolved").done(_counted(packages))
    if not offline and not problems:
        problems += _byte_drift(lock, lock.replace(envbuild=__version__, targets=tuple(relocked)))
    return problems


def _package_drift(lock: Lock, relocked: Lock) -> list[Problem]:
    """Per target and package, what re-resolution changed: a package added or removed, or its
    version, hashes, index or layer; for a conda target's conda packages, also build, url, sha256
    and channel."""
    found = []
    for now_target in relocked.targets:
        was_target = lock.target(now_target.name, now_target.platform)
        if was_target is None:
            continue
        was = {p.name: p for p in was_target.packages}
        now = {p.name: p for p in now_target.packages}
        suffix = platform_suffix(now_target.platform, relocked.platforms(now_target.name))
        found += conda_package_drift(was_target, now_target, suffix)
        for name in sorted(set(was) | set(now)):
            old, new = was.get(name), now.get(name)
            where = f"target {now_target.name!r}{suffix}: package {name}"
            if old is None or new is None:
                found.append(
                    problem(
                        "stale",
                        f"{where} " + ("is not in the lock" if old is None else "is no longer resolved"),
                        target=now_target.name,
                        platform=now_target.platform,
                        field="version",
                        package=name,
                        locked=old.version if old else None,
                        wanted=new.version if new else None,
                    )
                )
                continue
            for field in ("version", "hashes", "index", "layer"):
                a, b = getattr(old, field), getattr(new, field)
                if a != b:
                    a, b = (" ".join(a), " ".join(b)) if field == "hashes" else (a, b)
                    found.append(
                        problem(
                            "stale",
                            f"{where}: {field} {a} -> {b}",
                            target=now_target.name,
                            platform=now_target.platform,
                            field=field,
                            package=name,
                            locked=a,
                            wanted=b,
                        )
                    )
    return found


def _byte_drift(lock: Lock, relocked: Lock) -> list[Problem]:
    """What differs between the lock and the one `envbuild lock` writes now (its envbuild version
    aside, so upgrading envbuild alone does not fail CI): each package that differs, then the whole
    difference as a short unified diff, which also shows what no package field holds."""
    was, now = dumps(lock.replace(envbuild=__version__)), dumps(relocked)
    if was == now:
        return []
    diff = [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            was.splitlines(True), now.splitlines(True), "envbuild.lock", "re-resolved", n=1
        )
    ]
    shown = diff[2:22] + (["..."] if len(diff) > 22 else [])
    return [
        *_package_drift(lock, relocked),
        problem(
            "stale",
            "envbuild.lock is not what `envbuild lock` resolves now (a forged or stale pin):\n      "
            + "\n      ".join(shown),
        ),
    ]


def relock_summary(old: Lock | None, new: Lock) -> list[str]:
    lines = []
    for target in new.targets:
        before = old.target(target.name, target.platform) if old else None
        name = target.name + platform_suffix(target.platform, new.platforms(target.name))
        if before is None:
            conda = f", {len(target.conda)} conda packages" if target.conda else ""
            lines.append(f"{name}: locked {len(target.packages)} packages{conda}, base {target.base_image}")
            continue
        was = {p.name: p.version for p in before.packages}
        now = {p.name: p.version for p in target.packages}
        added = [f"+{n} {now[n]}" for n in sorted(set(now) - set(was))]
        removed = [f"-{n} {was[n]}" for n in sorted(set(was) - set(now))]
        changed = [f"{n} {was[n]} -> {now[n]}" for n in sorted(set(was) & set(now)) if was[n] != now[n]]
        parts = added + removed + changed
        lines.append(f"{name}: " + (", ".join(parts) if parts else "packages unchanged"))
        if target.conda or before.conda:
            conda_parts = conda_changes(before, target)
            lines.append(
                f"{name}: conda " + (", ".join(conda_parts) if conda_parts else "packages unchanged")
            )
        if before.base_image != target.base_image:
            lines.append(f"{name}: base {before.base_image} -> {target.base_image}")
    return lines
