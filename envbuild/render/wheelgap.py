"""The wheels envbuild.lock pins that a --wheelhouse lacks, found before anything is built.

An air-gapped build installs every locked package from the wheelhouse, hash-checked. When the lock
has outgrown the wheelhouse (a package added to the spec and relocked, the framework upgraded, and
the wheelhouse not topped up), the build ran its apt, venv and framework layers and then failed in
the user layer with uv's "No solution found". Everything needed to say so first is at hand: the lock
pins each package's version and sha256s for each target's platform and Python, and the wheelhouse's
file names say what it holds. So render and build compare them before they write or build anything,
and refuse (exit 2) with each missing wheel (name==version, its target, platform and layer), each
wheel there whose sha256 is none the lock pins ("differs from the lock"), and the `pip download`
lines that fetch what is missing.

A wheel serves a locked package when its file name's project and version are the package's, it
installs on the entry's platform (wheelhouse.installs_on) and one of its tags takes the entry's
CPython. Only such wheels are hashed: about 1 s per GB (3.1 s for torch 2.6.0's 2.9 GB CUDA stack on
the CI box), which the build's own context transfer reads again anyway.

The `pip download` lines: one per Python, platform and index, with `--no-deps` (the lock names every
package), `--only-binary=:all:`, `--python-version`, each `--platform` tag of the platform
(matrix.platforms), `--index-url` (`--find-links` for a find-links page), `-d WHEELHOUSE` and the
pins. The hashes are not on the line: pip takes `--hash` only inside a requirements file, and an
air-gapped wheelhouse is usually filled on another machine, where no file written here exists. The
next render or build checks every wheel's sha256 against the lock again, before it starts.
"""

from __future__ import annotations

import os
import shlex

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.matrix.platforms import platform as platform_named
from envbuild.plan.cudalayer import is_cuda_package
from envbuild.plan.strategy import strategy_for
from envbuild.render.wheelhash import wheel_sha256
from envbuild.render.wheelhouse import canonical, installs_on, require_directory, wheel_files

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envbuild.lockfile.model import LockedPackage, LockedTarget

MAX_LISTED = 20  # wheels the error lists one by one; the pip download lines name them all


class Gap(Record):
    """A locked package the wheelhouse cannot install: `found` names the wheels of its version that
    are there with another sha256 (empty: none is there)."""

    __slots__ = ("target", "platform", "python", "layer", "name", "version", "index", "found")
    target: str
    platform: str
    python: str
    layer: str  # framework | CUDA | user: the image layer that installs it
    name: str
    version: str
    index: str  # the index the lock resolved it from
    found: tuple[str, ...]


def takes_python(filename: str, python: str) -> bool:
    """Whether one of the wheel's tags installs on CPython `python` ("3.11"): cp311 (its own ABI or
    none), cp3X with the stable ABI (abi3) for X <= 11, or a py3 / py311 pure-Python tag."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    major, minor = python.split(".")[:2]
    own = f"cp{major}{minor}"
    for tag in tags:
        if tag.interpreter in (f"py{major}", f"py{major}{minor}") and tag.abi == "none":
            return True
        if tag.interpreter == own and tag.abi in (own, "abi3", "none"):
            return True
        if tag.abi == "abi3" and tag.interpreter.startswith(f"cp{major}"):
            older = tag.interpreter[len(f"cp{major}") :]
            if older.isdigit() and int(older) <= int(minor):
                return True
    return False


def _wheels_by_release(directory: str) -> dict[tuple[str, str], list[str]]:
    """{(canonical name, normalized version): [file names]} of the wheelhouse's wheels."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    found: dict[tuple[str, str], list[str]] = {}
    for filename in wheel_files(directory):
        try:
            name, version, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        found.setdefault((canonical(name), str(version)), []).append(filename)
    return found


def _layer(package: LockedPackage, strategy: str) -> str:
    pip_framework = strategy_for(strategy).pip_framework
    if package.layer == "framework" and pip_framework and is_cuda_package(package.name):
        return "CUDA"  # plan.plan.split_cuda: the framework's CUDA wheels install in a layer of their own
    return package.layer


def wheelhouse_gaps(directory: str, entries: Iterable[LockedTarget]) -> list[Gap]:
    """Every locked package of `entries` (a lock's target entries, one per target and platform) that
    the wheelhouse has no wheel of, or has only with another sha256; in lock order."""
    from packaging.version import InvalidVersion, Version

    require_directory(directory)
    wheels = _wheels_by_release(directory)
    digests: dict[str, str] = {}  # file name -> "sha256:...", each wheel read once
    gaps: list[Gap] = []
    for entry in entries:
        for package in entry.packages:
            try:
                version = str(Version(package.version))
            except InvalidVersion:
                version = package.version
            serving = [
                filename
                for filename in wheels.get((canonical(package.name), version), [])
                if installs_on(filename, entry.platform) and takes_python(filename, entry.python)
            ]
            for filename in serving:
                if filename not in digests:
                    digests[filename] = wheel_sha256(os.path.join(directory, filename))
            if any(digests[filename] in package.hashes for filename in serving):
                continue
            gaps.append(
                Gap(
                    target=entry.name,
                    platform=entry.platform,
                    python=entry.python,
                    layer=_layer(package, entry.strategy),
                    name=package.name,
                    version=package.version,
                    index=package.index,
                    found=tuple(serving),
                )
            )
    return gaps


def download_commands(gaps: Iterable[Gap], directory: str) -> list[str]:
    """The `pip download` lines that fetch the gaps' wheels into `directory`: one per Python,
    platform and index, each pin once."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for gap in gaps:
        pins = groups.setdefault((gap.python, gap.platform, gap.index), [])
        pin = f"{gap.name}=={gap.version}"
        if pin not in pins:
            pins.append(pin)
    commands = []
    for (python, platform, index), pins in groups.items():
        words = ["pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", python]
        for tag in platform_named(platform).wheel_tags:
            words += ["--platform", tag]
        # a find-links page (JAX's jax_cuda_releases.html) is an HTML file; an index is a directory
        source = "--find-links" if index.rstrip("/").endswith((".html", ".htm")) else "--index-url"
        words += [source, index, "-d", directory, *pins]
        commands.append(" ".join(shlex.quote(word) for word in words))
    return commands


def _wheels(count: int) -> str:
    return f"{count} wheel" if count == 1 else f"{count} wheels"


def require_wheels(directory: str, entries: Iterable[LockedTarget]) -> None:
    """Refuse (exit 2) a wheelhouse the lock has outgrown, before render writes or build builds."""
    gaps = wheelhouse_gaps(directory, entries)
    if not gaps:
        return
    missing = [gap for gap in gaps if not gap.found]
    differing = [gap for gap in gaps if gap.found]
    said = []
    if missing:
        said.append(f"lacks {_wheels(len(missing))} envbuild.lock pins (the lock has outgrown it)")
    if differing:
        said.append(f"has {_wheels(len(differing))} whose sha256 the lock does not pin")
    lines: list[str] = []
    heading = None
    for gap in gaps[:MAX_LISTED]:
        where = f"target {gap.target} ({gap.platform}, Python {gap.python}), {gap.layer} layer:"
        if where != heading:
            lines.append(where)
            heading = where
        what = ", ".join(gap.found) + " differs from the lock" if gap.found else "missing"
        lines.append(f"  - {gap.name}=={gap.version}: {what}")
    if len(gaps) > MAX_LISTED:
        lines.append(f"... and {len(gaps) - MAX_LISTED} more, all in the pip download line(s) below")
    steps = []
    if differing:
        doomed = sorted({os.path.join(directory, name) for gap in differing for name in gap.found})
        steps.append(
            "remove the wheels that differ (pip download keeps a file it finds there): rm "
            + " ".join(shlex.quote(path) for path in doomed)
        )
    steps.append(
        "fetch the wheels the lock pins, on a machine that can reach the index, into the wheelhouse:\n      "
        + "\n      ".join(download_commands(gaps, directory))
    )
    steps.append("build again: the wheels are checked against the lock's sha256s before it starts")
    raise UsageError(
        f"--wheelhouse {directory} {' and '.join(said)}:\n  " + "\n  ".join(lines),
        fix="\n    ".join(f"{n}. {step}" for n, step in enumerate(steps, 1)),
    )
