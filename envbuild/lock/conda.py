"""The conda layer of a conda-strategy target, solved in-process with py-rattler (the solver behind pixi).

The solve sees what the build will see: the target's CUDA as the `__cuda` virtual package (what
`CONDA_OVERRIDE_CUDA` tells micromamba at build time, when there is no driver), the base image's
glibc as `__glibc`, and the spec's channels in priority order (names on anaconda.org, or URLs of a
team's mirror). Its answer is exact: every package's URL and sha256, which render turns into an
explicit install with no solve at build time.

Each channel's repodata.json is fetched by envbuild.lock.repodata, bounded in bytes and time, and
rattler solves from those files. Every solved record then goes through the lock reader's own check
(envbuild.lockfile.read.check_conda_package) before it is locked: a record without a sha256, with a
file name that is unsafe or that contradicts its name, version and build, is a LockError naming the
channel and the package, never a lock that `render` and `lock --check` would refuse (issue 33). A
package URL on another host than its channel (the channel's `info.base_url` moved it) is locked
as it is, its URL in the lock, and said in the lock's output (see `moved_hosts`).

rattler is imported inside the functions: `envbuild resolve` never pays for it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError, LockError, NoStackError
from envbuild.lockfile.model import LockedCondaPackage
from envbuild.lockfile.read import check_conda_package

ANACONDA = "https://conda.anaconda.org"  # where a channel given by name lives
# mambaorg/micromamba:<version> (plan.strategy.conda.MICROMAMBA_IMAGE) is built on debian:13-slim
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
    """Where fetched repodata is kept: conda/ under envbuild's cache (matrix.load.cache_dir); None
    when caching is off (then each solve fetches into a temporary directory)."""
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
    records = _solve_from_files(request, specs, virtual, constraints)
    return tuple(sorted((_locked(record, layer) for record in records), key=lambda p: p.name))


def _solve_from_files(
    request: CondaRequest, specs: list, virtual: list, constraints: tuple[str, ...]
) -> list:
    """rattler's solve over the channels' repodata.json files, fetched (bounded) by
    envbuild.lock.repodata into the cache (or a temporary directory when caching is off)."""
    import asyncio
    import tempfile

    import rattler
    import requests

    from envbuild.lock.repodata import fetch, repodata_url

    root = cache_dir()
    with tempfile.TemporaryDirectory(prefix="envbuild-repodata-") as scratch, requests.Session() as session:
        directory = os.path.join(root, "repodata") if root else scratch
        os.makedirs(directory, exist_ok=True)
        sources = []
        for url in request.channels:
            channel = rattler.Channel(url)
            for subdir in (request.subdir, "noarch"):
                path = fetch(session, url, subdir, directory)
                try:
                    sources.append(rattler.SparseRepoData(channel, subdir, path))
                except Exception as exc:  # rattler's parse errors: OSError, ValueError, its own
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
                    raise LockError(
                        redact(
                            f"the conda channel {url} could not be read: {repodata_url(url, subdir)} "
                            f"is not conda repodata ({first})"
                        ),
                        fix="the channel serves a broken index; tell its maintainers, or use another "
                        "mirror in [packages] conda-channels",
                    ) from None
        try:
            return asyncio.run(
                rattler.solve_with_sparse_repodata(
                    specs,
                    sources,
                    virtual_packages=virtual,
                    constraints=[rattler.MatchSpec(spec) for spec in constraints] or None,
                )
            )
        except EnvbuildError:
            raise
        except Exception as exc:  # rattler's exceptions live in its private modules
            raise _explain(exc, request) from None


def _locked(record: object, layer: str) -> LockedCondaPackage:
    """The record as the lock holds it, checked by the lock reader's own rules (with the file name
    the channel gave it, which the URL may no longer show): a LockError naming the channel and the
    package when the lock's readers would refuse it."""
    sha256 = record.sha256  # type: ignore[attr-defined]
    package = LockedCondaPackage(
        name=record.name.normalized,  # type: ignore[attr-defined]
        version=str(record.version),  # type: ignore[attr-defined]
        build=str(record.build),  # type: ignore[attr-defined]
        layer=layer,
        channel=str(record.channel).rstrip("/"),  # type: ignore[attr-defined]
        subdir=str(record.subdir),  # type: ignore[attr-defined]
        url=str(record.url),  # type: ignore[attr-defined]
        sha256="sha256:" + sha256.hex() if sha256 else "",
    )
    file_name = str(record.file_name)  # type: ignore[attr-defined]
    try:
        check_conda_package(package, file_name=file_name)
    except ValueError as exc:
        shown = f"{package.name} {package.version} {package.build}"
        raise LockError(
            redact(
                f"the conda channel {package.channel} offers {shown} as {file_name[:200]!r}, which "
                f"envbuild will not lock: {exc}"
            ),
            fix="the channel's repodata.json is broken or hostile: tell its maintainers, pin another "
            "build in [packages] conda, or use another mirror in [packages] conda-channels",
        ) from None
    return package


def moved_hosts(packages: tuple[LockedCondaPackage, ...]) -> dict[str, list[str]]:
    """{host: [package, ...]} of the packages whose URL is on another host than their channel's: the
    channel's repodata.json set `info.base_url` (CEP 15) to a CDN or another server. They are locked
    (a mirror's CDN is real, and the sha256 still comes from the channel), and the lock's output
    names them, so a reviewer sees where the bytes will come from."""
    moved: dict[str, list[str]] = {}
    for package in packages:
        host = urlsplit(package.url).netloc.rpartition("@")[2].lower()
        if host != urlsplit(package.channel).netloc.rpartition("@")[2].lower():
            moved.setdefault(host, []).append(package.name)
    return moved


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
