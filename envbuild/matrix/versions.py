"""Parsing of the small version vocabularies the matrix and the CLI share.

NVIDIA driver versions are not PEP 440 versions (``570.26`` and ``550.54.15`` are both real), CUDA
minors are compared as ``(major, minor)``, and compute capabilities arrive as ``8.9``, ``sm_89`` or
``compute_90``. Keeping them as plain int tuples makes comparisons exact and cheap.
"""

from __future__ import annotations

import re

from envbuild.errors import UsageError

_DRIVER_RE = re.compile(r"^[Rr]?(\d{3})(?:\.(\d{1,3}))?(?:\.(\d{1,3}))?$")
_MINOR_RE = re.compile(r"^(\d+)\.(\d+)$")
_PATCH_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_CC_RE = re.compile(r"^(?:(?:sm|compute)_?)?(\d+)\.?(\d)?([af])?$", re.IGNORECASE)

DRIVER_FORMS = "550, R550, 550.54 or 550.54.15"


class Driver:
    """An NVIDIA Linux driver: a full version, or a bare branch meaning "a current driver of it".

    A bare branch (``550``/``R550``) stands for an up-to-date driver of that branch, so it meets
    every minimum driver published within the branch and none in a later one.
    """

    __slots__ = ("bare", "parts")

    def __init__(self, parts: tuple[int, ...], *, bare: bool) -> None:
        self.parts = parts
        self.bare = bare

    @property
    def branch(self) -> int:
        return self.parts[0]

    def at_least(self, floor: tuple[int, ...]) -> bool:
        if self.bare:
            return floor[0] <= self.parts[0]
        return _pad(self.parts) >= _pad(floor)

    def __str__(self) -> str:
        return f"R{self.parts[0]}" if self.bare else format_driver(self.parts)

    def __repr__(self) -> str:
        return f"Driver({self})"


def _pad(parts: tuple[int, ...]) -> tuple[int, ...]:
    return parts + (0,) * (3 - len(parts))


def parse_driver(text: str, *, flag: str = "--driver") -> Driver:
    text = text.strip()
    match = _DRIVER_RE.match(text)
    if not match or (text[:1] in "Rr" and match.group(2) is not None):
        raise UsageError(
            f"{flag} {text!r} is not an NVIDIA driver version",
            fix=f"give {DRIVER_FORMS} (nvidia-smi prints it as 'Driver Version')",
        )
    parts = tuple(int(p) for p in match.groups() if p is not None)
    return Driver(parts, bare=len(parts) == 1)


def parse_driver_floor(text: str) -> tuple[int, ...]:
    """A published minimum driver such as ``550.54.14`` or ``570.26``."""
    match = _DRIVER_RE.match(text)
    if not match or text[0] in "Rr" or match.group(2) is None:
        raise ValueError(f"{text!r} is not a full driver version like 550.54.14")
    return tuple(int(p) for p in match.groups() if p is not None)


def format_driver(parts: tuple[int, ...]) -> str:
    """NVIDIA writes the later components with two digits at least: 450.80.02, 570.26."""
    return ".".join([str(parts[0]), *(f"{p:02d}" for p in parts[1:])])


# a matrix load parses the same few dozen X.Y strings over a thousand times (every GPU row's
# capability and first CUDA, every build's CUDA): remembered, not re-matched (issue 34 item 9)
_MINORS: dict[str, tuple[int, int]] = {}


def parse_minor(text: str) -> tuple[int, int]:
    """``"12.4"`` -> ``(12, 4)``; raises ValueError otherwise."""
    known = _MINORS.get(text)
    if known is not None:
        return known
    match = _MINOR_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not an X.Y version")
    parsed = _MINORS[text] = (int(match.group(1)), int(match.group(2)))
    return parsed


def parse_patch(text: str) -> tuple[int, int, int]:
    match = _PATCH_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not an X.Y.Z version")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def format_minor(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def parse_compute_capability(text: str) -> tuple[int, int] | None:
    """``8.9``, ``sm_89``, ``sm89``, ``compute_90``, ``12.0``, ``sm_120`` -> (major, minor).

    Returns None when the text is not written as a capability (it may be a GPU name). The ``a``/``f``
    suffixes (``sm_90a``) name arch-specific targets of the same capability.
    """
    text = text.strip()
    match = _CC_RE.match(text)
    if not match:
        return None
    digits, dotted_minor, _suffix = match.groups()
    if "." in text:
        if dotted_minor is None:
            return None
        return int(digits), int(dotted_minor)
    if not text.lower().startswith(("sm", "compute")) or len(digits) < 2:
        return None
    return int(digits[:-1]), int(digits[-1])


def format_cc(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def sm_name(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def release_key(version: str) -> tuple[int, ...]:
    """Sortable form of a final or post release: "2.15.0.post1" -> (2, 15, 0, 0, 1)."""
    release, _, post = version.partition(".post")
    parts = [int(part) for part in release.split(".")]
    return (*parts, *[0] * (4 - len(parts)), int(post or 0))
