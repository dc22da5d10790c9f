"""The conda layer of a conda-strategy target in envbuild.lock: what it asks conda for, its solve in
two layers, and how `lock --check` and the relock summary see it.

The framework layer is Python, `cuda-version`, the framework's conda packages (the GPU one with its
`cuda<major>*` build string) and pip (the image's pip layer runs it); the user layer is the spec's
`[packages] conda` solved with every framework package held at its exact build, so the full
environment is the framework layer plus additions, and render can install the framework's closure
in its own cached image layer. A relock passes the previous pins as constraints, so nothing moves
unless `--upgrade` frees it; when the spec changed so that they no longer solve, it solves afresh
and says so. The solve itself is envbuild.lock.conda's.
"""

from __future__ import annotations

import re

from envbuild._util.progress import SILENT, Progress
from envbuild.errors import NoStackError
from envbuild.lock.conda import MICROMAMBA_GLIBC, CondaRequest, channel_url, moved_hosts, solve_conda
from envbuild.lockfile.model import LockedCondaPackage, LockedTarget, canonical
from envbuild.lockfile.problem import Problem, drift_recorder, problem
from envbuild.matrix.platforms import platform as platform_named
from envbuild.matrix.versions import format_minor
from envbuild.plan.plan import Plan
from envbuild.plan.strategy import strategy_for

# the fields of a locked conda package a re-solve compares, in the order a message lists them
FIELDS = ("version", "build", "sha256", "url", "channel", "layer")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def framework_specs(plan: Plan) -> tuple[str, ...]:
    """The framework layer's match specs: python=X.Y, cuda-version=X.Y, the framework, pip."""
    return (
        f"python={plan.python}",
        f"cuda-version={format_minor(plan.stack.cuda)}",
        *plan.conda_framework,
        "pip",
    )


def spec_name(spec: str) -> str:
    """The package a conda match spec names (`conda-forge::numpy>=1.26` -> numpy), without rattler:
    the upgrade check reads it for every lock."""
    found = _NAME.match(spec.rpartition("::")[2].strip())
    return found.group(0).lower() if found else spec


def _pin(package: LockedCondaPackage, subdir: str) -> str:
    """`lib==2.0=pyh0_0`: exact, build included where the build is this platform's (or noarch); a
    pin carried over from another platform's entry holds the version only."""
    same = package.subdir in (subdir, "noarch")
    return f"{package.name}=={package.version}" + (f"={package.build}" if same else "")


def lock_conda(
    plan: Plan,
    channels: tuple[str, ...],
    *,
    keep: tuple[LockedCondaPackage, ...] = (),
    upgrade_packages: tuple[str, ...] = (),
    progress: Progress = SILENT,
    where: str = "",
) -> tuple[LockedCondaPackage, ...]:
    """The conda layer of a conda-strategy plan, framework layer first then user, each by name; ()
    for other strategies. `keep`: the previous lock's packages, held unless named in
    `upgrade_packages`. One step of `progress`."""
    if not strategy_for(plan.strategy).conda_environment:
        return ()
    subdir = platform_named(plan.platform).conda_subdir
    freed = {canonical(name) for name in upgrade_packages}
    pins = tuple(_pin(p, subdir) for p in keep if canonical(p.name) not in freed)
    request = CondaRequest(  # solved through the channels' mirrors; the lock records the canonical URLs
        channels=tuple(plan.mirrors.url(channel_url(c)) for c in channels),
        specs=framework_specs(plan),
        subdir=subdir,
        cuda=format_minor(plan.stack.cuda),
        glibc=MICROMAMBA_GLIBC,
    )
    step = progress.begin(f"{where}: conda layer", f"solving the conda layer of {where}")
    framework, afresh = _solve(request, pins, "framework")
    user: tuple[LockedCondaPackage, ...] = ()
    if plan.conda:
        held = tuple(f"{p.name}=={p.version}={p.build}" for p in framework)
        added = request.replace(specs=(*request.specs, *held, *plan.conda))
        solved, again = _solve(added, pins, "user")  # type: ignore[arg-type]
        afresh = afresh or again
        in_framework = {p.name for p in framework}
        user = tuple(p for p in solved if p.name not in in_framework)
    framework, user = _canonical(framework, plan), _canonical(user, plan)
    detail = f"{len(framework)} framework + {len(user)} user packages from {', '.join(request.channels)}"
    if afresh:
        detail += "; the previous conda pins do not solve with the spec now, so it was solved afresh"
    for host, names in sorted(moved_hosts(framework + user).items()):  # info.base_url: said, not hidden
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        detail += (
            f"; {len(names)} package(s) download from {host}, not from their channel's host (its "
            f"repodata.json sets info.base_url): {shown}; their url in envbuild.lock says so"
        )
    step.done(detail)
    return framework + user


def _canonical(packages: tuple[LockedCondaPackage, ...], plan: Plan) -> tuple[LockedCondaPackage, ...]:
    """Each package's channel and url as the canonical channel names them (the sha256 is the file's,
    the same on the mirror); a url on another host than the mirror (info.base_url) stays as it is."""
    mirrors = plan.mirrors
    return tuple(
        p.replace(channel=mirrors.canonical_url(p.channel), url=mirrors.canonical_url(p.url))  # type: ignore[misc]
        for p in packages
    )


def _solve(
    request: CondaRequest, pins: tuple[str, ...], layer: str
) -> tuple[tuple[LockedCondaPackage, ...], bool]:
    """The solve with the previous pins as constraints, else (they conflict) without them: (the
    packages, whether the pins had to go)."""
    if pins:
        try:
            return solve_conda(request, layer=layer, constraints=pins), False
        except NoStackError:  # the spec changed under them: a free solve, whose own error counts
            return solve_conda(request, layer=layer), True
    return solve_conda(request, layer=layer), False


def conda_drift(
    locked: LockedTarget, plan: Plan, channels: tuple[str, ...], platforms: tuple[str, ...]
) -> list[Problem]:
    """What the spec and matrix imply about a conda target's conda layer that the lock does not
    say, offline: no conda layer at all, a package from a channel the spec no longer lists, a
    match spec (framework, python, cuda-version, pip, [packages] conda) no locked package meets."""
    if not strategy_for(plan.strategy).conda_environment:
        return []
    import rattler

    found: list[Problem] = []
    drift = drift_recorder(locked.name, locked.platform, platforms, found)

    if not locked.conda:
        drift(
            "the conda layer is not locked (a lock from before envbuild locked it)",
            "conda",
            None,
            "conda",
            None,
        )
        return found
    urls = tuple(channel_url(c) for c in channels)
    for package in locked.conda:
        if package.channel.rstrip("/") not in urls:
            drift(
                f"conda package {package.name} comes from {package.channel}, not from the spec's "
                f"conda-channels ({', '.join(urls)})",
                "channel",
                package.channel,
                ", ".join(urls),
                package.name,
            )
    by_name = {p.name: p for p in locked.conda}
    for spec in (*framework_specs(plan), *plan.conda):
        match = rattler.MatchSpec(spec)
        package = by_name.get(match.name.normalized if match.name else spec_name(spec))
        if package is None:
            drift(f"conda spec {spec} has no locked package", "conda", None, spec, spec_name(spec))
            continue
        record = rattler.PackageRecord(
            package.name, package.version, rattler.BuildString(package.build), 0, package.subdir
        )
        if not match.matches(record):
            drift(
                f"conda spec {spec} is locked at {package.version} {package.build}",
                "version",
                f"{package.version}={package.build}",
                spec,
                package.name,
            )
    return found


def conda_package_drift(was: LockedTarget, now: LockedTarget, suffix: str) -> list[Problem]:
    """Per conda package, what a re-solve changed: added, gone, or any of FIELDS."""
    found = []
    old_by, new_by = {p.name: p for p in was.conda}, {p.name: p for p in now.conda}
    for name in sorted(set(old_by) | set(new_by)):
        old, new = old_by.get(name), new_by.get(name)
        where = f"target {now.name!r}{suffix}: conda package {name}"
        if old is None or new is None:
            found.append(
                problem(
                    "stale",
                    f"{where} " + ("is not in the lock" if old is None else "is no longer solved"),
                    target=now.name,
                    platform=now.platform,
                    field="version",
                    package=name,
                    locked=old.version if old else None,
                    wanted=new.version if new else None,
                )
            )
            continue
        for field in FIELDS:
            a, b = getattr(old, field), getattr(new, field)
            if a != b:
                found.append(
                    problem(
                        "stale",
                        f"{where}: {field} {a} -> {b}",
                        target=now.name,
                        platform=now.platform,
                        field=field,
                        package=name,
                        locked=a,
                        wanted=b,
                    )
                )
    return found


def conda_changes(before: LockedTarget, after: LockedTarget) -> list[str]:
    """`+app 1.0`, `-lib 1.0`, `lib 2.0 -> 3.0` (a build change shows the builds): the relock
    summary's conda part."""
    was = {p.name: p for p in before.conda}
    now = {p.name: p for p in after.conda}

    def shown(p: LockedCondaPackage, other: LockedCondaPackage | None) -> str:
        return p.version + (f" ({p.build})" if other is not None and other.version == p.version else "")

    added = [f"+{n} {now[n].version}" for n in sorted(set(now) - set(was))]
    removed = [f"-{n} {was[n].version}" for n in sorted(set(was) - set(now))]
    changed = [
        f"{n} {shown(was[n], now[n])} -> {shown(now[n], was[n])}"
        for n in sorted(set(was) & set(now))
        if (was[n].version, was[n].build) != (now[n].version, now[n].build)
    ]
    return added + removed + changed
