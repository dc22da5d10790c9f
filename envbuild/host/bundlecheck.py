"""`envbuild doctor --bundle BUNDLE`: whether a bundle `envbuild vendor` wrote can build a lock here,
offline, before the host is cut off from the network and it is too late to fetch what is missing.

Three things, each a Check with evidence and a fix: the bundle's manifest (readable, made for this
lock: its lock-digest is the lock's content-digest), its coverage of the lock (every file hash-checked
by envbuild.vendor.check.bundle_problems, the one check `build --bundle` makes too), and, for each
platform of its base images, whether this host can run it (natively, or under QEMU through an enabled
binfmt_misc handler). The Engine itself is doctor's own "docker engine" check. Nothing here opens a
socket: no registry, no index.
"""

from __future__ import annotations

import os

from envbuild._util import limits
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.host.check import Check

if TYPE_CHECKING:
    from envbuild.lockfile.model import Lock, LockedTarget
    from envbuild.vendor.manifest import Manifest

SHOWN_PROBLEMS = 12  # the coverage check's evidence names this many problems, then counts the rest


class BundleSubject(Record):
    """What `--bundle` is judged against: the bundle, the lock, and the installer of the spec."""

    __slots__ = ("bundle", "lock_path", "spec_path", "installer")
    bundle: str
    lock_path: str
    spec_path: str  # for the fixes: `envbuild vendor -f SPEC -o BUNDLE`
    installer: str  # the spec's [image] installer (uv: uv's wheel must be in the bundle)


def bundle_subject(bundle: str, *, lock: str | None, spec: str) -> BundleSubject:
    """The bundle, the lock it is judged against (`--lock`, else the envbuild.lock beside `spec`) and
    the spec's installer (uv when there is no spec: its default); a UsageError (exit 2) before any
    check runs when the bundle is not a directory or there is no lock to judge it against."""
    from envbuild.lockfile.model import lock_path

    if not os.path.isdir(bundle):
        raise UsageError(
            f"--bundle {bundle} is not a directory"
            + (" (it does not exist)" if not os.path.lexists(bundle) else ""),
            fix=f"name the directory `envbuild vendor -f {spec} -o BUNDLE` wrote",
        )
    path = lock if lock is not None else lock_path(spec)
    if not os.path.isfile(path):
        raise UsageError(
            f"--bundle {bundle} is judged against a lock, and {path} does not exist"
            + ("" if lock is not None else f" (the envbuild.lock beside -f {spec})"),
            fix=f"run `envbuild lock -f {spec}` (then `envbuild vendor -f {spec} -o {bundle}`), or name "
            "the lock the bundle was made for: --lock PATH",
        )
    installer = "uv"
    if os.path.isfile(spec):
        from envbuild.spec.model import load_spec

        installer = load_spec(spec).image.installer
    return BundleSubject(bundle=bundle, lock_path=path, spec_path=spec, installer=installer)


def _vendor_again(subject: BundleSubject) -> str:
    return (
        f"`envbuild vendor -f {subject.spec_path} -o {subject.bundle}` fetches what is missing or damaged "
        "(resumably: what is there with the right hash is kept), where the network can be reached"
    )


def manifest_check(subject: BundleSubject, lock_digest: str) -> tuple[Check, Manifest | None]:
    """bundle.json readable, and made for the lock whose content-digest is `lock_digest`."""
    from envbuild.vendor.manifest import ManifestProblem, read_manifest

    name = "bundle"
    try:
        manifest = read_manifest(subject.bundle)
    except ManifestProblem as exc:
        return Check(name=name, status="fail", evidence=str(exc), fix=_vendor_again(subject)), None
    size = limits.size(sum(f.size for f in manifest.files))
    made = f"{subject.bundle}: made by envbuild {manifest.envbuild}, {len(manifest.files)} files, {size}"
    if manifest.lock_digest != lock_digest:
        return (
            Check(
                name=name,
                status="fail",
                evidence=f"{subject.bundle}: made for another lock: its lock-digest is "
                f"{manifest.lock_digest}, and {subject.lock_path}'s content-digest is {lock_digest}",
                fix=f"the lock changed since the bundle was made: run envbuild vendor again "
                f"(`envbuild vendor -f {subject.spec_path} -o {subject.bundle}`), or judge it against the "
                "lock it was made for: --lock PATH",
            ),
            manifest,
        )
    return (
        Check(name=name, status="ok", evidence=f"{made}; made for {subject.lock_path}", fix=None),
        manifest,
    )


def _entries(lock: Lock, manifest: Manifest | None) -> tuple[list[LockedTarget], list[LockedTarget]]:
    """(the lock entries the bundle was vendored for, the lock's others). A bundle made for another
    lock, or without a readable manifest, is judged against every entry."""
    if manifest is None:
        return list(lock.targets), []
    vendored = {(t.name, t.platform) for t in manifest.targets}
    chosen = [e for e in lock.targets if (e.name, e.platform) in vendored]
    return chosen, [e for e in lock.targets if (e.name, e.platform) not in vendored]


def coverage_check(
    subject: BundleSubject, lock: Lock, entries: list[LockedTarget], left_out: list[LockedTarget]
) -> Check:
    """Every file of the bundle there with its size and sha256, and each of `entries` covered."""
    from envbuild.vendor.check import bundle_problems

    name = "bundle coverage"
    problems = bundle_problems(subject.bundle, lock, entries, installer=subject.installer)
    if problems:
        shown = problems[:SHOWN_PROBLEMS]
        more = len(problems) - len(shown)
        return Check(
            name=name,
            status="fail",
            evidence=f"{subject.bundle}: {len(problems)} problem(s): "
            + "; ".join(shown)
            + (f"; {more} more" if more else ""),
            fix=_vendor_again(subject),
        )
    covered = ", ".join(f"{e.name} ({e.platform})" for e in entries)
    if left_out:
        others = ", ".join(f"{e.name} ({e.platform})" for e in left_out)
        return Check(
            name=name,
            status="warn",
            evidence=f"covers {covered}, every file hash-checked; not vendored (--target): {others}",
            fix=f"`envbuild vendor -f {subject.spec_path} -o {subject.bundle}` (no --target) adds them, "
            "if this host builds them",
        )
    return Check(
        name=name,
        status="ok",
        evidence=f"covers {covered or 'no target'}: every locked wheel, conda file and base image blob "
        f"there, hash-checked (installer {subject.installer})",
        fix=None,
    )


def platform_checks(
    entries: list[LockedTarget], *, machine: str | None = None, binfmt: str | None = None
) -> list[Check]:
    """For each platform of the bundle's base images: whether this host runs it, natively or under
    QEMU (binfmt_misc). Not runnable is a warning: the bundle can still be carried to a host that is."""
    from envbuild.image.platforms import runnable

    checks = []
    for platform, bases in _bases_by_platform(entries).items():
        name = f"bundle base {platform}"
        try:
            run = runnable(platform, machine=machine, binfmt=binfmt)
        except ValueError as exc:  # a lock's platforms are checked when it is read: not expected
            checks.append(Check(name=name, status="warn", evidence=str(exc), fix=None))
            continue
        images = ", ".join(bases)
        if run.ok and not run.emulated:
            evidence = f"{images}: runs natively on this {run.host} host"
            checks.append(Check(name=name, status="ok", evidence=evidence, fix=None))
        elif run.ok:
            evidence = (
                f"{images}: runs on this {run.host} host under QEMU ({run.handler} enabled): builds and the "
                "CPU smoke step only, no GPU"
            )
            checks.append(Check(name=name, status="ok", evidence=evidence, fix=None))
        else:
            checks.append(
                Check(
                    name=name,
                    status="warn",
                    evidence=f"{images}: {run.reason}",
                    fix=f"build it on a {run.platform} host, the bundle copied there; {run.fix}",
                )
            )
    return checks


def _bases_by_platform(entries: list[LockedTarget]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in entries:
        bases = found.setdefault(entry.platform, [])
        if entry.base_image not in bases:
            bases.append(entry.base_image)
    return found


def bundle_checks(
    subject: BundleSubject, *, machine: str | None = None, binfmt: str | None = None
) -> list[Check]:
    """The manifest, the coverage and the platform checks of `doctor --bundle`, offline."""
    from envbuild.lockfile.read import read_lock

    read = read_lock(subject.lock_path)
    manifest_line, manifest = manifest_check(subject, read.digest)
    if manifest is None:
        coverage = Check(
            name="bundle coverage",
            status="skip",
            evidence="no bundle.json to check the files against",
            fix=None,
        )
        entries = list(read.lock.targets)
    else:
        same_lock = manifest_line.status == "ok"
        entries, left_out = _entries(read.lock, manifest if same_lock else None)
        coverage = coverage_check(subject, read.lock, entries, left_out)
    return [manifest_line, coverage, *platform_checks(entries, machine=machine, binfmt=binfmt)]
