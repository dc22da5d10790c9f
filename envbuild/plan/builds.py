"""Which (platform, locked entry) pairs a target builds: the one rule render and build share.

The platforms are the spec's (its `platform` list, else what its GPUs imply), never the lock's: a lock
made before a platform was added must not shrink the build, and one platform must never be built from
another platform's entry. A lock that has the target but not for one of its platforms is a LockError
before anything is rendered or built; a target the lock lacks altogether is lockmatch's to report.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import LockError
from envbuild.lockfile.model import lock_path
from envbuild.resolve.platform_choice import target_platforms

if TYPE_CHECKING:
    from envbuild.lockfile.model import Lock, LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.spec.model import Spec, Target


def target_builds(
    matrix: Matrix, spec: Spec, target: Target, lock: Lock | None
) -> tuple[tuple[str, LockedTarget | None], ...]:
    """Each platform the spec builds `target` for, with the lock's entry for that platform (None
    without a lock)."""
    return tuple(
        (platform, locked_for(lock, target.name, platform, spec.path) if lock else None)
        for platform in target_platforms(matrix, target.stack)
    )


def locked_for(lock: Lock, target: str, platform: str, path: str) -> LockedTarget | None:
    """The lock's entry of `target` for `platform`. A lock that has the target but not for this
    platform was made before the platform was added to the spec: building it unlocked, or from another
    platform's entry, would hide that, so it is a LockError."""
    locked = lock.target(target, platform)
    if locked is None and lock.platforms(target):
        raise LockError(
            f"{lock_path(path)}: target {target!r} is locked for {', '.join(lock.platforms(target))}, "
            f"not for {platform}",
            fix="run `envbuild lock` (it locks every platform of the target) and commit envbuild.lock",
        )
    return locked
