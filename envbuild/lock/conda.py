"""The conda layer of a conda-strategy target, solved in-process with py-rattler (the solver behind pixi).

The solve sees what the build will see: the target's CUDA as the `__cuda` virtual package (what
`CONDA_OVERRIDE_CUDA` tells micromamba at build time, when there is no driver), the base image's
glibc as `__glibc`, and the spec's channels in priority order (names on anaconda.org, or URLs of a
team's mirror). Its answer is exact: every package's URL and sha256, which render turns into an
explicit install with no solve at build time.

rattler is imported inside the functions: `envbuild resolve` never pays for it.
"""

from __future__ import annotations

import os
import re

from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.errors import LockError, NoStackError
from envbuild.spec.lockfile import LockedCondaPackage

ANACONDA = "https://conda.anaconda.org"  # where a channel given by name lives
# mambaorg/micromamba:<version> (render.plan.MICROMAMBA_IMAGE) is built on debian:13-slim
# (mamba-org/micromamba-docker, .github/workflows/push_latest.yml DEFAULT_BASE_IMAGE, a815800), and
# Debian 13's glibc is 2.41: the __glibc the solve assumes for the conda strategy's base
MICROMAMBA_GLIBC = "2.41"
LINUX_KERNEL = (
    "5.10"  # __linux: a floor every data-center GPU host's kernel meets; no package here needs more
)


class CondaRequest(Record):
    """One conda solve: channels (URLs, highest priority first), match specs, the conda subdir
    (linux-64 | linux-aarch64), and the virtual packages' versions."""

    __slots__ = ("channels", "specs", "subdir", "cuda", "glibc")
    channels: tuple[str, ...]
    specs: tuple[str, ...]
    subdir: str
    cuda: str  # "12.8": __cuda, as CONDA_OVERRIDE_CUDA at build time
    glibc: str  # "2.41": __glibc of the base image


def channel_url(channel: str) -> str:
    """A channel's URL: a name is anaconda.org's (conda-forge -> https://conda.anaconda.org/conda-forge),
    a URL (a mirror) is kept as given, without a trailing slash."""
    return channel.rstrip("/") if "://" in channel else f"{ANACONDA}/{channel}"


def cache_dir() -> str | None:
    """Where rattler keeps fetched repodata: conda/ under envbuild's cache (matrix.load.cache_dir);
    None (rattler's default) when caching is off."""
    from envbuild.matrix.load import cache_dir as envbuild_cache

    root = envbuild_cache()
    return os.path.join(root, "conda") if root else None


def solve_conda(
    request: CondaRequest, *, layer: str = "framework", constraints: tuple[str, ...] = ()
) -> tuple[LockedCondaPackage, ...]:
    """Every package of the solved environment, by name, each marked `layer`. `constraints` bind a
    package only if the environment has it (a relock's previous pins: they keep versions without
    pulling in a package the spec no longer needs). An unsatisfiable request is a NoStackError
    (exit 3) naming the conflict; an unreachable or broken channel a LockError naming its URL."""
    import asyncio

    import rattler

    virtual = [
        rattler.GenericVirtualPackage(
            rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0")
        )
        for name, version in (
            ("__cuda", request.cuda),
            ("__glibc", request.glibc),
            ("__linux", LINUX_KERNEL),
            ("__unix", "0"),
        )
    ]
    specs = [rattler.MatchSpec(spec) for spec in request.specs]  # lenient: pytorch=2.5.1=cuda12*
    channels = [rattler.Channel(url) for url in request.channels]

    async def solve() -> list:
        gateway = rattler.Gateway(cache_dir=cache_dir())
        return await rattler.solve(
            channels,
            specs,
            gateway=gateway,
            platforms=[request.subdir, "noarch"],
            virtual_packages=virtual,
            constraints=[rattler.MatchSpec(spec) for spec in constraints] or None,
        )

    try:
        records = asyncio.run(solve())
    except Exception as exc:  # rattler's exceptions live in its private modules
        raise _explain(exc, request) from None
    return tuple(sorted((_locked(record, layer) for record in records), key=lambda p: p.name))


def _locked(record: object, layer: str) -> LockedCondaPackage:
    sha256 = record.sha256  # type: ignore[attr-defined]
    return LockedCondaPackage(
        name=record.name.normalized,  # type: ignore[attr-defined]
        version=str(record.version),  # type: ignore[attr-defined]
        build=str(record.build),  # type: ignore[attr-defined]
        layer=layer,
        channel=str(record.channel).rstrip("/"),  # type: ignore[attr-defined]
        subdir=str(record.subdir),  # type: ignore[attr-defined]
        url=str(record.url),  # type: ignore[attr-defined]
        sha256="sha256:" + sha256.hex() if sha256 else "",
    )


_TREE = re.compile(r"^[\s│├└─]+")


def _explain(exc: Exception, request: CondaRequest) -> Exception:
    kind = type(exc).__name__
    text = str(exc)
    if kind == "SolverError":
        lines = [_TREE.sub("", line).strip() for line in text.splitlines()]
        lines = [line for line in lines if line and not line.startswith("Cannot solve the request")]
        shown = "; ".join(lines[:8]) + (" ..." if len(lines) > 8 else "")
        return NoStackError(
            f"no conda environment satisfies {', '.join(request.specs)} on {request.subdir} with "
            f"__cuda={request.cuda}: {shown}",
            fix="relax the conflicting [packages] conda specs, or resolve a stack whose CUDA the "
            "channel's framework builds support (envbuild resolve shows the candidates)",
        )
    urls = re.findall(r"https?://[^\s'\")]+", text)
    channel = next((c for c in request.channels for u in urls if u.startswith(c)), None)
    channel = channel or (urls[0] if urls else ", ".join(request.channels))
    first = text.strip().splitlines()[0] if text.strip() else kind
    return LockError(
        redact(f"the conda channel {channel} could not be read: {first}"),
        fix="check the channel URL in [packages] conda-channels, the network or proxy, and that the "
        "mirror serves <subdir>/repodata.json",
    )
