"""A team's decision not to judge one library: `--skip-audit LIBRARY="REASON"`, or `[audit] skip` in
envbuild.toml, where the decision is committed with the spec.

The audit fails when cuobjdump can list nothing of a library the framework loads its kernels from:
no GPU can be judged by it, and passing what was never seen would be a lie. When a team knows why
(a cuobjdump too old or too new for that build, an issue already filed), it may build anyway by
naming the library and saying why. The library is then listed but not judged, and the decision, with
its reason and where it was made, goes into the audit report, build/<target>/record.json and the SBOM,
so whoever pulls the image can see what was not checked. Nothing is skipped silently: the reason is
required, and a skip naming a library the artifact does not have is a warning.

A library is named by its file name (`libtorch_cuda.so`, `libcublas.so.12`), the way the error
names it and the same in a wheel, a directory and an image, wherever the framework puts it. Every
copy of that name is skipped.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata

from envbuild._util.record import Record
from envbuild.errors import UsageError

FLAG = "--skip-audit"
SPEC = "envbuild.toml"  # the source of a skip read from the spec's [audit] table
MAX_REASON = 300  # a sentence and an issue link; the record, the report and the SBOM all carry it
MAX_LIBRARY = 200
_LIBRARY_RE = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*\.so(\.[0-9]+)*$")
# characters that end, split or hide a line (as envbuild.spec.validate refuses them in every field)
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}
EXAMPLE = f'{FLAG} libtorch_cuda.so="cuobjdump 13.5 cannot read it, envbuild issue #N"'


class AuditSkip(Record):
    __slots__ = ("library", "reason", "source")
    library: str  # a file name: libtorch_cuda.so
    reason: str
    source: str  # FLAG or SPEC: where the decision was made

    def document(self, paths: tuple[str, ...] = ()) -> dict:
        """What the report and record.json keep; `paths`: the libraries it matched."""
        return {"library": self.library, "reason": self.reason, "source": self.source, "paths": list(paths)}

    def matches(self, path: str) -> bool:
        return posixpath.basename(path.replace("\\", "/")) == self.library


def check_library(name: str) -> str:
    """A shared object's file name; ValueError saying what is accepted."""
    if "/" in name or "\\" in name:
        raise ValueError("is a path; name the library by its file name alone (libtorch_cuda.so)")
    if len(name) > MAX_LIBRARY or not _LIBRARY_RE.fullmatch(name):
        raise ValueError(
            "is not a shared object's file name (letters, digits, _ . + -, ending in .so or .so.N: "
            "libtorch_cuda.so, libcublas.so.12)"
        )
    return name


def check_reason(text: str) -> str:
    """A non-empty reason of at most MAX_REASON characters on one line; ValueError otherwise."""
    reason = text.strip()
    if not reason:
        raise ValueError("has no reason; say why the library need not be judged (and link an issue)")
    if len(reason) > MAX_REASON:
        raise ValueError(f"has a reason of {len(reason)} characters; at most {MAX_REASON}")
    for char in reason:
        if unicodedata.category(char) in _UNSAFE:
            raise ValueError(
                f"has a reason with a control or invisible character (U+{ord(char):04X}): write one line"
            )
    return reason


def parse_flag(text: str) -> AuditSkip:
    """`LIBRARY=REASON`, as --skip-audit takes it; a UsageError naming the flag otherwise."""
    library, equals, reason = text.partition("=")
    try:
        if not equals:
            raise ValueError("has no reason")
        return AuditSkip(library=check_library(library.strip()), reason=check_reason(reason), source=FLAG)
    except ValueError as exc:
        raise UsageError(
            f"{FLAG} {text[:80]!r} {exc}",
            fix=f'give {FLAG} LIBRARY="REASON", e.g. {EXAMPLE}',
        ) from None


def parse_flags(texts: list[str]) -> tuple[AuditSkip, ...]:
    """Every --skip-audit of a command line, parsed before anything runs. A library named twice is
    a usage error: which reason would count?"""
    flags: dict[str, AuditSkip] = {}
    for text in texts:
        skip = parse_flag(text)
        if skip.library in flags:
            raise UsageError(
                f"{FLAG} names {skip.library} twice", fix=f"give one {FLAG} {skip.library}=REASON"
            )
        flags[skip.library] = skip
    return tuple(flags.values())


def merge(from_spec: tuple[AuditSkip, ...], from_flags: tuple[AuditSkip, ...]) -> tuple[AuditSkip, ...]:
    """The spec's skips and the command line's, one per library: a flag replaces the spec's skip of
    the same library, and its reason is the one recorded."""
    merged = {skip.library: skip for skip in from_spec}
    merged.update({skip.library: skip for skip in from_flags})
    return tuple(merged.values())
