"""`render/build --bundle`: the bundle `envbuild vendor` wrote, as what render takes from it.

A bundle crossed an air gap on a disk someone handed over: everything in it is untrusted. Its manifest
is read strictly (envbuild.vendor.manifest) and `require_covers` checks, before anything is written or
built, that it holds every file the lock needs with the sha256 the lock pins
(envbuild.vendor.check.bundle_problems, what `doctor --bundle` reports too): a build that would fail
halfway, or install something else, stops first with each missing or altered file named.

What render takes from it: wheels/ is the wheelhouse (the --wheelhouse code path, unchanged), and
oci/ the base image (envbuild.image.bundlebase loads it into the engine).
"""

from __future__ import annotations

import os

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.vendor.manifest import FIX, BundleFile, BundleTarget, ManifestProblem, read_manifest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envbuild.lockfile.model import Lock


class Bundle(Record):
    """A bundle as bundle.json describes it; `directory` is where it lies on this machine."""

    __slots__ = ("directory", "envbuild", "lock_digest", "targets", "files")
    directory: str
    envbuild: str
    lock_digest: str
    targets: tuple[BundleTarget, ...]
    files: tuple[BundleFile, ...]

    @property
    def wheelhouse(self) -> str:
        return os.path.join(self.directory, "wheels")


def read_bundle(directory: str) -> Bundle:
    """The bundle at `directory`; a UsageError (exit 2) naming what is wrong when it is not one."""
    if not os.path.isdir(directory):
        raise UsageError(
            f"--bundle {directory} is not a directory", fix="pass the directory `envbuild vendor` wrote"
        )
    try:
        manifest = read_manifest(directory)
    except ManifestProblem as exc:
        raise UsageError(f"--bundle {directory}: {exc}", fix=FIX) from None
    return Bundle(
        directory=directory,
        envbuild=manifest.envbuild,
        lock_digest=manifest.lock_digest,
        targets=manifest.targets,
        files=manifest.files,
    )


def require_covers(
    bundle_dir: str, lock: Lock | None, targets: Iterable[str] | None, *, installer: str = "uv"
) -> Bundle:
    """The bundle, when it covers the lock's entries of `targets` (names; None: every target) for the
    spec's `installer`; else a UsageError (exit 2, like a wheelhouse that lacks a locked wheel) listing
    each problem, before anything is written."""
    from envbuild.vendor.check import bundle_problems

    bundle = read_bundle(bundle_dir)
    if lock is None:
        raise UsageError(
            f"--bundle {bundle_dir}: there is no envbuild.lock next to the spec; a bundle serves a lock",
            fix="build with the envbuild.lock the bundle was made from (commit it beside envbuild.toml)",
        )
    problems = bundle_problems(bundle_dir, lock, list(targets or ()), installer=installer)
    if problems:
        shown = "\n  - ".join(problems[:20]) + (
            f"\n  - ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        )
        raise UsageError(f"--bundle {bundle_dir} does not cover envbuild.lock:\n  - {shown}", fix=FIX)
    return bundle
