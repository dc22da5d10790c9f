"""Which platforms a target is built for: what the spec says, else what its GPUs imply.

One module so that resolve, lock, render, bake and build never disagree about a target's platforms
(a Grace GPU must never get an amd64-only answer), and so that `resolve --platform` and a spec's
`platform` are judged by the same rule."""

from __future__ import annotations

from collections.abc import Sequence

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import UsageError
from envbuild.matrix.platforms import DEFAULT_PLATFORM, PLATFORMS

if TYPE_CHECKING:
    from envbuild.matrix.model import Gpu, Matrix
    from envbuild.spec.model import StackSpec


def refuse_integrated(gpus: Sequence[Gpu], where: str) -> None:
    """A Jetson/Tegra GPU runs JetPack/L4T: an nvidia/cuda or PyPI CUDA stack would not run there, so
    say what to use instead rather than resolve something that cannot work (exit 2)."""
    for gpu in gpus:
        if gpu.integrated:
            raise UsageError(
                f"{where} {gpu.name!r} is an integrated (Jetson/Tegra) GPU: its CUDA comes with "
                "JetPack/L4T, not the data-center driver, nvidia/cuda images and CUDA wheels envbuild "
                "builds on",
                fix=f"use {gpu.integrated_stack or 'JetPack and its containers'} instead",
            )


def gpu_platforms(gpus: Sequence[Gpu], where: str) -> tuple[str, ...]:
    """The host platforms every GPU fits (empty: no constraint). GPUs that need different platforms
    (GB200 with an x86-only part) cannot share one image: a UsageError naming them."""
    allowed: set[str] = set(PLATFORMS)
    for gpu in gpus:
        if gpu.host_platforms:
            allowed &= set(gpu.host_platforms)
    constrained = [gpu for gpu in gpus if gpu.host_platforms]
    if constrained and not allowed:
        names = ", ".join(f"{g.name} ({'/'.join(g.host_platforms)})" for g in constrained)
        raise UsageError(
            f"{where}: the GPUs need different host platforms: {names}; one image runs on one platform",
            fix="resolve each platform's GPUs separately (one [[target]] per platform)",
        )
    return tuple(p for p in PLATFORMS if p in allowed) if constrained else ()


def _arm64_reason(gpus: Sequence[Gpu], platform: str) -> str:
    only = [g for g in gpus if g.host_platforms and platform not in g.host_platforms]
    names = ", ".join(g.name for g in only)
    hosts = "/".join(dict.fromkeys(p for g in only for p in g.host_platforms))
    grace = " (a Grace superchip: its CPU is arm64)" if hosts == "linux/arm64" else ""
    return f"{names} comes only in {hosts} hosts{grace}"


def choose_platform(gpus: Sequence[Gpu], requested: str | None, where: str = "--platform") -> str:
    """The platform a query resolves for: the one asked for (checked against the GPUs), else the one
    the GPUs imply (a Grace GPU: linux/arm64), else linux/amd64."""
    implied = gpu_platforms(gpus, where)
    if requested is None:
        if implied:
            return DEFAULT_PLATFORM if DEFAULT_PLATFORM in implied else implied[0]
        return DEFAULT_PLATFORM
    if implied and requested not in implied:
        raise UsageError(
            f"{where} {requested}: {_arm64_reason(gpus, requested)}",
            fix=f"use {where} {' or '.join(implied)}, or leave it out",
        )
    return requested


def target_platforms(matrix: Matrix, stack: StackSpec) -> tuple[str, ...]:
    """The spec's `platform` list, else what the target's GPUs imply (a Grace GPU: linux/arm64), else
    linux/amd64. GPU names the matrix does not know are left to the resolver to report."""
    if stack.platforms:
        return stack.platforms
    from envbuild.matrix.model import find_gpu

    gpus = [g for g in (find_gpu(matrix, name) for name in stack.gpus) if g is not None]
    try:
        return (choose_platform(gpus, None),)
    except UsageError:
        return (DEFAULT_PLATFORM,)  # the query reports the clash with its own field names
