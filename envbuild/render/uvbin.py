"""The uv binary a build context carries for `[image] installer = "uv"`: placed at uv/uv, used through a
RUN bind mount, and so never part of an image layer.

Where it comes from:
* `--wheelhouse DIR` (air-gapped): the `uv-<version>-...manylinux..._<machine>.whl` in DIR for the
  image's platform (x86_64 for linux/amd64, aarch64 for linux/arm64), of the same version as the uv
  envbuild itself runs to lock, so the lock and the image agree on one uv.
* otherwise: the host's own installed uv (envbuild's dependency), when the host is Linux on the
  image's machine: an x86_64 host's uv cannot run in an arm64 image.
* otherwise (another machine, no wheelhouse): uv's wheel for the image's machine, fetched from the
  spec's index (PyPI by default) through its [mirrors], its sha256 checked against the index's
  listing, and cached (envbuild.vendor.uvwheel: the same fetch `envbuild vendor` bundles uv with);
  the binary is then checked against the wheel's RECORD like a wheelhouse's.

An executable entering the build is checked: its sha256 must equal the one its distribution's RECORD
states (the wheel's own RECORD, or the one the installer wrote on the host when it installed the
hash-checked wheel). A mismatch is a corrupted or altered file, and nothing is written.
"""

from __future__ import annotations

import base64
import hashlib
import os
import platform
import re
import shutil
import sys
import zipfile

from envbuild.errors import UsageError
from envbuild.matrix.platforms import DEFAULT_PLATFORM, Platform
from envbuild.matrix.platforms import platform as platform_named
from envbuild.spec.mirrors import NO_MIRRORS, Mirrors
from envbuild.vendor.uvwheel import host_uv_version  # lives in vendor, which bundles uv too

__all__ = ["host_uv_version", "place_uv"]

# uv's Linux wheels: manylinux (glibc >= 2.17) and musllinux (static, runs on any libc), per machine
_UV_WHEEL = re.compile(r"^uv-(?P<version>[^-]+)-py3-none-(?P<platform>[^-]+)\.whl$")
PIP_FALLBACK = 'or set installer = "pip" under [image] in envbuild.toml'


def _record_sha256(value: str) -> str:
    """RECORD's `sha256=<urlsafe base64, no padding>` as hex."""
    encoded = value.split("=", 1)[1]
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()


def _download_hint(version: str | None, image: Platform) -> str:
    pin = f"uv=={version}" if version else "uv"
    tag = next(t for t in image.wheel_tags if t.startswith("manylinux_2_17"))  # uv's wheels' floor
    return f"pip download {pin} --no-deps --only-binary=:all: --platform {tag} -d DIR, {PIP_FALLBACK}"


def _from_wheelhouse(directory: str, target: str, image: Platform) -> str:
    version = host_uv_version()
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []  # split_wheelhouse reports an unreadable wheelhouse by its own words
    wheels = [
        (name, match)
        for name in names
        if (match := _UV_WHEEL.match(name)) and match.group("platform").endswith(f"_{image.machine}")
    ]
    wanted = [(name, match) for name, match in wheels if match.group("version") == version]
    if not wanted:
        found = ", ".join(name for name, _ in wheels) or "no uv wheel"
        raise UsageError(
            f"--wheelhouse {directory}: installer uv needs uv {version or '(any)'}'s Linux {image.machine} "
            f"wheel there for the {image.name} image (the uv envbuild runs to lock), and it has {found}",
            fix=f"put it there with `{_download_hint(version, image)}`",
        )
    name, match = wanted[0]
    path = os.path.join(directory, name)
    inner = f"uv-{match.group('version')}.data/scripts/uv"
    try:
        with zipfile.ZipFile(path) as archive:
            record = archive.read(f"uv-{match.group('version')}.dist-info/RECORD").decode()
            data = archive.read(inner)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise UsageError(
            f"--wheelhouse: {path} is not a readable uv wheel ({exc})",
            fix=f"download it again: `{_download_hint(version, image)}`",
        ) from None
    expected = next(
        (_record_sha256(line.split(",")[1]) for line in record.splitlines() if line.startswith(inner + ",")),
        None,
    )
    actual = hashlib.sha256(data).hexdigest()
    if expected != actual:
        raise UsageError(
            f"--wheelhouse: {path}: the uv binary's sha256 is {actual}, but the wheel's RECORD says "
            f"{expected}: the file was altered or corrupted",
            fix=f"download it again: `{_download_hint(version, image)}`",
        )
    with open(target, "wb") as handle:
        handle.write(data)
    os.chmod(target, 0o755)
    return f"uv {match.group('version')} from {name}"


def host_runs(image: Platform) -> bool:
    """Whether this host's own uv binary runs in an image of `image`'s platform."""
    machine = platform.machine().lower()
    return sys.platform.startswith("linux") and machine in (image.machine, image.architecture)


def _from_host(target: str, image: Platform) -> str:
    from importlib import metadata

    machine = platform.machine().lower()
    if not host_runs(image):
        raise UsageError(
            f"installer uv: the {image.name} image needs uv's Linux {image.machine} binary, and this host "
            f"runs {sys.platform} {machine}, so its own uv cannot go in",
            fix=f"pass --wheelhouse DIR holding uv's wheel ({_download_hint(host_uv_version(), image)})",
        )
    try:
        dist = metadata.distribution("uv")
    except metadata.PackageNotFoundError:
        raise UsageError(
            "installer uv: uv is not installed beside envbuild",
            fix=f"reinstall envbuild (it depends on uv), {PIP_FALLBACK}",
        ) from None
    entry = next((f for f in dist.files or () if f.name == "uv" and f.parent.name == "bin" and f.hash), None)
    path = str(entry.locate()) if entry is not None else ""
    expected = entry.hash.value if entry is not None and entry.hash else ""
    try:
        with open(path, "rb") as handle:
            actual = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        actual = ""
    if not actual or _record_sha256(f"sha256={expected}") != actual:
        raise UsageError(
            f"installer uv: the installed uv binary {path or '(not found)'} does not match the sha256 "
            "its RECORD states: the file was altered or is missing",
            fix=f"reinstall uv (`pip install --force-reinstall uv=={dist.version}`), {PIP_FALLBACK}",
        )
    try:
        os.link(path, target)  # the same bytes, without copying 40 MB into every context
    except OSError:
        shutil.copyfile(path, target)
        os.chmod(target, 0o755)
    return f"uv {dist.version} from this host"


def _fetched(target: str, image: Platform, index: str | None, mirrors: Mirrors) -> str:
    """uv's wheel for the image's machine from the index (cached, sha256 checked against the listing),
    then its binary checked against the wheel's RECORD."""
    from envbuild.vendor.uvwheel import cached_uv_wheel

    wheel = cached_uv_wheel(image.name, index=index, mirrors=mirrors)
    placed = _from_wheelhouse(os.path.dirname(wheel), target, image)
    return f"{placed} (fetched for {image.name}, cached in {os.path.dirname(wheel)})"


def place_uv(
    destination: str,
    wheelhouse: str | None,
    image_platform: str = DEFAULT_PLATFORM,
    *,
    index: str | None = None,
    mirrors: Mirrors = NO_MIRRORS,
) -> str:
    """Write the checked uv binary for `image_platform` to destination/uv; returns where it came from,
    for messages. Without a wheelhouse on a host of another machine, uv's wheel is fetched from
    `index` (canonical; None: PyPI) through `mirrors`, and cached."""
    image = platform_named(image_platform)
    os.makedirs(destination, exist_ok=True)
    target = os.path.join(destination, "uv")
    if wheelhouse is not None:
        return _from_wheelhouse(wheelhouse, target, image)
    if not host_runs(image):
        return _fetched(target, image, index, mirrors)
    return _from_host(target, image)
