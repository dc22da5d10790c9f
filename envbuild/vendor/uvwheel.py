"""uv's own wheel for an image's machine, from a package index: what a build context carries for
`[image] installer = "uv"` when the host's uv is for another machine (an x86_64 host rendering a
linux/arm64 image), and what a bundle carries for each platform.

The version is the one envbuild runs to lock (so the lock and the image agree on one uv); the index is
the spec's [packages] index-url through its [mirrors], PyPI by default. The file's sha256 must be the
one the index's listing states (a listing without one is refused). Fetched wheels are kept under
envbuild's cache (`$XDG_CACHE_HOME/envbuild/uv/`, or ENVBUILD_CACHE_DIR), and a cached one is used
offline once its sha256 (remembered beside it) still matches; a corrupt one is fetched again.
"""

from __future__ import annotations

import os
import re

from envbuild._util.files import write_atomic
from envbuild._util.progress import SILENT, Progress
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import EnvbuildError, UsageError
from envbuild.matrix.platforms import platform as platform_named

if TYPE_CHECKING:
    from envbuild.spec.mirrors import Mirrors
    from envbuild.vendor.download import Tally
    from envbuild.vendor.session import Session

PYPI_SIMPLE = "https://pypi.org/simple"
UV_WHEEL = re.compile(r"^uv-(?P<version>[^-]+)-py3-none-(?P<platform>[^-]+)\.whl$")


def host_uv_version() -> str | None:
    """The version of the uv envbuild runs (its `uv` dependency), or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("uv")
    except metadata.PackageNotFoundError:
        return None


def uv_wheel_matches(filename: str, version: str, machine: str) -> bool:
    """Whether `filename` is uv `version`'s Linux wheel for `machine` (manylinux or musllinux)."""
    match = UV_WHEEL.match(filename)
    if not match or match.group("version") != version:
        return False
    tags = match.group("platform").split(".")
    return any(t.startswith(("manylinux", "musllinux")) and t.endswith(f"_{machine}") for t in tags)


class UvWheel(Record):
    """The wheel chosen on the index: its file name, canonical URL and the sha256 the index states."""

    __slots__ = ("filename", "url", "sha256")
    filename: str
    url: str  # canonical: the mirror's prefix undone
    sha256: str


def _need_version(version: str | None) -> str:
    if not version:
        raise UsageError(
            "installer uv: uv is not installed beside envbuild, so there is no uv version to fetch",
            fix='reinstall envbuild (it depends on uv), or set installer = "pip" under [image] in '
            "envbuild.toml",
        )
    return version


def find_uv_wheel(
    session: Session, index: str | None, mirrors: Mirrors, image_platform: str, version: str | None = None
) -> UvWheel:
    """uv `version`'s (default: the host's) wheel for the machine of `image_platform` on `index`
    (canonical URL; None: PyPI), asked through `mirrors`: a manylinux wheel first (the images are
    glibc), else musllinux (static)."""
    from envbuild.vendor.index import project_files

    version = _need_version(version or host_uv_version())
    machine = platform_named(image_platform).machine
    canonical_index = (index or PYPI_SIMPLE).rstrip("/")
    files = project_files(session, mirrors.url(canonical_index), "uv")
    chosen = sorted(
        (f for f in files if uv_wheel_matches(f.filename, version, machine)),
        key=lambda f: ("musllinux" in f.filename, f.filename),
    )
    if not chosen:
        raise EnvbuildError(
            f"{canonical_index} lists no uv {version} wheel for Linux {machine} (the uv envbuild runs)",
            fix="point [packages] index-url (or its [mirrors] entry) at an index that mirrors uv, or pass "
            "--wheelhouse DIR holding the wheel",
        )
    best = chosen[0]
    if best.sha256 is None:
        raise EnvbuildError(
            f"{canonical_index}: the listing of {best.filename} states no sha256, so it cannot be checked",
            fix="use an index that states file hashes (PEP 503 #sha256= fragments or PEP 691 hashes)",
        )
    return UvWheel(filename=best.filename, url=mirrors.canonical_url(best.url), sha256=best.sha256)


def fetch_uv_wheel(session: Session, wheel: UvWheel, directory: str, mirrors: Mirrors, tally: Tally) -> str:
    """`wheel` into `directory` (kept when there with its sha256); its path."""
    from envbuild.vendor.download import store, url_pieces

    path = os.path.join(directory, wheel.filename)
    url = mirrors.url(wheel.url)
    store(
        path,
        wheel.sha256,
        url_pieces(session, url, what=wheel.filename),
        label=f"uv {wheel.filename}",
        source=url,
        tally=tally,
    )
    return path


def cache_directory() -> str | None:
    """Where fetched uv wheels are kept: <envbuild cache>/uv, None when the cache is off."""
    from envbuild.matrix.load import cache_dir

    root = cache_dir()
    return os.path.join(root, "uv") if root else None


def _cached(directory: str, version: str, machine: str) -> str | None:
    """A cached uv wheel for (version, machine) whose remembered sha256 its bytes still have."""
    from envbuild.vendor.download import intact

    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return None
    for name in names:
        if not uv_wheel_matches(name, version, machine):
            continue
        path = os.path.join(directory, name)
        try:
            with open(f"{path}.sha256", encoding="ascii") as handle:
                expected = handle.read(80).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if re.fullmatch(r"[0-9a-f]{64}", expected) and intact(path, expected):
            return path
    return None


def cached_uv_wheel(
    image_platform: str,
    *,
    index: str | None,
    mirrors: Mirrors,
    directory: str | None = None,
    progress: Progress = SILENT,
) -> str:
    """The path of a checked uv wheel (the host's uv version) for `image_platform`'s machine: from the
    cache when an intact one is there (no network), else fetched from `index` (canonical; None: PyPI)
    through `mirrors`, its sha256 checked against the index's listing, and cached. `directory`:
    where to keep it (default: cache_directory(), or a temporary directory when the cache is off)."""
    from envbuild.vendor.download import Tally
    from envbuild.vendor.session import Session

    version = _need_version(host_uv_version())
    machine = platform_named(image_platform).machine
    if directory is None:
        directory = cache_directory()
    if directory is None:
        import tempfile

        directory = tempfile.mkdtemp(prefix="envbuild-uv-")
    found = _cached(directory, version, machine)
    if found is not None:
        return found
    session = Session()
    try:
        wheel = find_uv_wheel(session, index, mirrors, image_platform, version)
        path = fetch_uv_wheel(session, wheel, directory, mirrors, Tally(progress))
    finally:
        session.close()
    write_atomic(f"{path}.sha256", wheel.sha256 + "\n")
    return path
