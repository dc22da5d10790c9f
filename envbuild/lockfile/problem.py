"""One reason a lock is not the lock `envbuild lock` would write now, as data.

`envbuild lock --check` prints each problem's message; `--check --json` prints the records, so a CI
step or a bot can act on them (relock one target, name the package that moved) without parsing text.
The seal (lockfile.seal), the drift from spec and matrix (plan.lockmatch) and the re-resolution
(lock.locker) all produce them, so the record lives here, below all three.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.matrix.platforms import DEFAULT_PLATFORM

if TYPE_CHECKING:
    from collections.abc import Callable

# What went wrong, from the outside in (docs/concepts/lockfile.md: "--check --json").
KINDS = (
    "seal",  # the content digest or HMAC does not hold: edited without envbuild (or the key)
    "spec",  # envbuild.toml changed since the lock (its digest)
    "matrix",  # the compatibility matrix changed since the lock (its digest)
    "target",  # a target locked but no longer in the spec, or in the spec but not locked
    "unresolvable",  # the spec and matrix no longer give this target a stack
    "drift",  # a field the spec and matrix decide (stack, python, requirements, indexes) differs
    "stale",  # re-resolving with the lock's own pins gives other packages, versions or hashes
    "generated",  # a CI file `envbuild ci` wrote differs from what its recorded command writes now
    "unreadable",  # the lock is missing, not a file, or malformed (`--check --json` only; else an error)
)


class Problem(Record):
    """kind: one of KINDS. target: the target it concerns, or None for the whole lock. platform:
    the platform of that target's entry ("linux/arm64"; each platform is locked on its own), or
    None for the whole lock. field: the
    lock field that differs (e.g. "python", "cuda", "requirements", "version", "hashes", "index"),
    or None. package: the package it concerns, or None. locked / wanted: what the lock holds and
    what the spec, matrix or re-resolution give now (None when absent on that side). message: the
    line `envbuild lock --check` prints."""

    __slots__ = ("kind", "target", "platform", "field", "package", "locked", "wanted", "message")

    kind: str
    target: str | None
    platform: str | None
    field: str | None
    package: str | None
    locked: str | None
    wanted: str | None
    message: str

    def to_dict(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in self.__slots__}


def problem(
    kind: str,
    message: str,
    *,
    target: str | None = None,
    platform: str | None = None,
    field: str | None = None,
    package: str | None = None,
    locked: object = None,
    wanted: object = None,
) -> Problem:
    """A Problem, with locked/wanted as text (None stays None), so every value in the JSON is a string."""
    return Problem(
        kind=kind,
        target=target,
        platform=platform,
        field=field,
        package=package,
        locked=None if locked is None else str(locked),
        wanted=None if wanted is None else str(wanted),
        message=message,
    )


def drift_recorder(
    target: str, platform: str, platforms: tuple[str, ...], found: list[Problem]
) -> Callable[..., None]:
    """drift(message, field, locked, wanted, package=None): appends a "drift" Problem about the lock
    entry (target, platform) to `found`, its message prefixed by the target's name (and platform,
    see platform_suffix). One shape for render's and lock's drift lists."""
    name = f"target {target!r}" + platform_suffix(platform, platforms)

    def drift(message: str, field: str, locked: object, wanted: object, package: str | None = None) -> None:
        found.append(
            problem(
                "drift",
                f"{name}: {message}",
                target=target,
                platform=platform,
                field=field,
                package=package,
                locked=locked,
                wanted=wanted,
            )
        )

    return drift


def platform_suffix(platform: str, platforms: tuple[str, ...]) -> str:
    """` (linux/arm64)`: what follows a target's name in a message about its `platform` entry, when
    the target is locked for several platforms or for another than linux/amd64; "" for the
    amd64-only target, whose messages keep the words they always had."""
    return "" if tuple(platforms) in ((), (DEFAULT_PLATFORM,)) else f" ({platform})"
