"""Which wheel file suits a locked entry: its platform (matrix.platforms wheel tags) and its CPython.

The same judgement the wheelhouse check makes (render.wheelgap), from the wheel's file name alone,
here below render so that vendor and the bundle check share it.
"""

from __future__ import annotations

import re

from envbuild.matrix.platforms import platform as platform_named

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(?P<machine>.+)$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _glibc_floor(wheel_tags: tuple[str, ...]) -> tuple[int, int]:
    """The newest glibc the platform's tags name (manylinux_2_28 -> (2, 28)): the image's floor."""
    found = [(int(m.group(1)), int(m.group(2))) for t in wheel_tags if (m := _MANYLINUX.match(t))]
    return max(found) if found else (2, 17)


def platform_suits(tag: str, image_platform: str) -> bool:
    """Whether one platform tag installs on a glibc Linux image of `image_platform`: `any`, or a
    manylinux tag for its machine no newer than the platform's newest wheel tag."""
    if tag == "any":
        return True
    entry = platform_named(image_platform)
    if tag in entry.wheel_tags:
        return True
    match = _MANYLINUX.match(tag)
    if match:
        glibc = (int(match.group(1)), int(match.group(2)))
        return match.group("machine") == entry.machine and glibc <= _glibc_floor(entry.wheel_tags)
    legacy, _, machine = tag.partition("_")
    if legacy in _LEGACY:
        return machine == entry.machine and _LEGACY[legacy] <= _glibc_floor(entry.wheel_tags)
    return False


def python_suits(interpreter: str, abi: str, python: str) -> bool:
    """Whether an interpreter/ABI tag pair installs on CPython `python` ("3.11"): py3 / py311 with no
    ABI, cp311 with its own ABI or none, or the stable ABI of an older cp3X."""
    major, minor = python.split(".")[:2]
    own = f"cp{major}{minor}"
    if interpreter in (f"py{major}", f"py{major}{minor}") and abi == "none":
        return True
    if interpreter == own and abi in (own, "abi3", "none"):
        return True
    if abi == "abi3" and interpreter.startswith(f"cp{major}"):
        older = interpreter[len(f"cp{major}") :]
        return older.isdigit() and int(older) <= int(minor)
    return False


def wheel_suits(filename: str, image_platform: str, python: str | None) -> bool:
    """Whether the wheel `filename` installs on `image_platform` (and CPython `python`, when given):
    one of its tags must take both."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    return any(
        platform_suits(tag.platform, image_platform)
        and (python is None or python_suits(tag.interpreter, tag.abi, python))
        for tag in tags
    )


def release_of(filename: str) -> tuple[str, str] | None:
    """(canonical project name, normalised version) of a wheel file name, None when it is not one."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return canonicalize_name(name), str(version)


def normal_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version
