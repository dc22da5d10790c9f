"""The one vocabulary for "which CPU the image runs on", shared by every stage.

A platform is named as OCI and Docker name it (`linux/amd64`, `linux/arm64`); each stage needs it
spelled its own way: uv's `--python-platform`, pip's `--platform` wheel tags, the machine name
`uname -m` and PEP 508's `platform_machine` print, and the architecture an image config records.
Keeping the spellings in one table means a new platform is one row here, not a hunt through lock,
render, engine and doctor.
"""

from __future__ import annotations

from envbuild._util.record import Record

DEFAULT_PLATFORM = "linux/amd64"


class Platform(Record):
    __slots__ = ("name", "architecture", "machine", "uv_platform", "wheel_tags", "conda_subdir", "display")
    name: str  # OCI/Docker: linux/amd64
    architecture: str  # an image config's "architecture": amd64
    machine: str  # uname -m, PEP 508 platform_machine: x86_64
    uv_platform: str  # uv pip compile --python-platform: x86_64-manylinux_2_28
    wheel_tags: tuple[str, ...]  # pip download --platform, newest first (manylinux_2_28 is torch's floor)
    conda_subdir: str  # the conda platform (subdir) of a channel: linux-64
    display: str  # what a person calls it


PLATFORMS: dict[str, Platform] = {
    "linux/amd64": Platform(
        name="linux/amd64",
        architecture="amd64",
        machine="x86_64",
        uv_platform="x86_64-manylinux_2_28",
        wheel_tags=(
            "manylinux_2_28_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
        ),
        conda_subdir="linux-64",
        display="x86_64",
    ),
    "linux/arm64": Platform(
        name="linux/arm64",
        architecture="arm64",
        machine="aarch64",
        uv_platform="aarch64-manylinux_2_28",
        wheel_tags=(
            "manylinux_2_28_aarch64",
            "manylinux_2_27_aarch64",
            "manylinux_2_17_aarch64",
            "manylinux2014_aarch64",
        ),
        conda_subdir="linux-aarch64",
        display="arm64 (aarch64, SBSA)",
    ),
}
# what people type for the same thing; matched case-insensitively
_ALIASES = {
    "amd64": "linux/amd64",
    "x86_64": "linux/amd64",
    "x86-64": "linux/amd64",
    "linux/x86_64": "linux/amd64",
    "arm64": "linux/arm64",
    "aarch64": "linux/arm64",
    "linux/aarch64": "linux/arm64",
    "linux/arm64/v8": "linux/arm64",
    "sbsa": "linux/arm64",
}


def accepted() -> str:
    return ", ".join(PLATFORMS)


def normalize(value: str) -> str:
    """`value` as its canonical name (`aarch64` -> `linux/arm64`); ValueError naming what is accepted."""
    key = value.strip().lower()
    if key in PLATFORMS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(f"unknown platform {value!r}; accepted: {accepted()}")


def platform(name: str) -> Platform:
    return PLATFORMS[normalize(name)]


def by_machine(machine: str) -> Platform | None:
    """The platform of a `uname -m` / image-architecture name, or None for one envbuild does not build."""
    for entry in PLATFORMS.values():
        if machine in (entry.machine, entry.architecture):
            return entry
    return None


def short(name: str) -> str:
    """`linux/arm64` -> `arm64`: a suffix for per-platform file names and tags."""
    return platform(name).architecture
