"""The images a spec builds, one per (target, platform): the one rule every command shares.

render, build, lock, `lock --check`, bake, `ci *` and k8s all walk this list, so they agree on three
things that used to be written six times, with rules that disagreed:

- **the platforms** are the spec's (its `platform` list, else what its GPUs imply), never the lock's: a
  lock made before a platform was added must not shrink the build, and one platform must never be built
  from another platform's entry. A lock that has the target but not for one of its platforms is a
  LockError before anything is rendered or built; a target the lock lacks altogether is lockmatch's to
  report (and `lock --check`'s, which reads the lock itself and passes none here).
- **the key** that names a build's candidate tag, bake target, cache and CI artifacts: the target's
  name, or `<target>-<arch>` for each platform of a target with several.
- **the context path** under render's -o directory: `<target>`, or `<target>/<arch>` for each platform
  of a target with several. Subdirectories rather than `<target>-arm64` siblings: every platform of a
  target stays under the one directory render replaces as a whole, and no other target's name (a target
  called `x-arm64`) can collide with a platform's context.

The plan is not part of the list: what it holds depends on each command's options (a base-image
override, a wheelhouse, BuildKit) and, for lock, on the pins being made, so each caller plans a build
with `build_plan(matrix, spec, build.target, lock=build.locked, platform=build.platform, ...)`.
"""

from __future__ import annotations

import os

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import LockError
from envbuild.lockfile.model import lock_path
from envbuild.matrix.platforms import short
from envbuild.resolve.platform_choice import target_platforms

if TYPE_CHECKING:
    from envbuild.lockfile.model import Lock, LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.spec.model import Spec, Target


class TargetBuild(Record):
    """One image of the spec: `target` on `platform`, one of the target's `platforms` (the spec's
    order), with the lock's entry for that platform (None without a lock)."""

    __slots__ = ("target", "platform", "platforms", "locked")
    target: Target
    platform: str
    platforms: tuple[str, ...]
    locked: LockedTarget | None

    @property
    def one_of_several(self) -> bool:
        """True for each platform of a target built for several: its key and context carry the arch."""
        return len(self.platforms) > 1

    @property
    def arch(self) -> str:
        """`amd64`, `arm64`: the platform's short name, as tags and directories spell it."""
        return short(self.platform)

    @property
    def suffix(self) -> str:
        """`-arm64` for one platform of a target with several, else empty."""
        return f"-{self.arch}" if self.one_of_several else ""

    @property
    def key(self) -> str:
        """Names the build's candidate tag, bake target, cache and CI artifacts."""
        return self.target.name + self.suffix

    @property
    def context(self) -> str:
        """The context's path under render's -o directory, with "/" (as bake and CI files write it)."""
        return f"{self.target.name}/{self.arch}" if self.one_of_several else self.target.name

    def context_dir(self, out_dir: str) -> str:
        """The context's directory under `out_dir`."""
        return os.path.join(out_dir, *self.context.split("/"))


def builds(
    matrix: Matrix, spec: Spec, lock: Lock | None = None, only: str | None = None
) -> tuple[TargetBuild, ...]:
    """Every image the spec builds, in the spec's target order and then each target's platforms'.
    `only`: the target of that name (spec.target's rule: an unknown name is a UsageError). With a
    lock, each build carries its platform's entry, or a LockError names the platform it lacks."""
    out: list[TargetBuild] = []
    for target in spec.target(only):
        platforms = target_platforms(matrix, target.stack)
        out += [
            TargetBuild(
                target=target,
                platform=platform,
                platforms=platforms,
                locked=locked_for(lock, target.name, platform, spec.path) if lock else None,
            )
            for platform in platforms
        ]
    return tuple(out)


def by_target(all_builds: tuple[TargetBuild, ...]) -> dict[str, tuple[TargetBuild, ...]]:
    """The builds grouped by target name, in their order: a target of several platforms is rendered,
    verified and promoted as one."""
    grouped: dict[str, list[TargetBuild]] = {}
    for build in all_builds:
        grouped.setdefault(build.target.name, []).append(build)
    return {name: tuple(group) for name, group in grouped.items()}


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
