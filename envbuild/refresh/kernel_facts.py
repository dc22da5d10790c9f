"""A matrix row's arch list against the kernels measured in its wheels: confirmed, or the correction.

The row's `arch` (envbuild.matrix.arch grammar) says which SASS and PTX a build carries; the audit
reads the real fatbin entries. The measured list is the union over the libraries the framework
loads its kernels from. `a`-suffixed entries (sm_90a) run on exactly one capability and the arch
grammar has no way to say so: they are reported, not written, so a row never claims more than the
artifact gives. `f` entries (sm_100f) run on their family like plain SASS and count as such.
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.audit.kernels import Kernels, arch_key
from envbuild.audit.verdict import split_arch
from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.versions import format_cc

CC = tuple[int, int]


class Measured(Record):
    __slots__ = ("sass", "ptx", "specific")
    sass: frozenset[CC]
    ptx: frozenset[CC]
    specific: tuple[str, ...]  # "sm_90a"... entries only the exact capability runs


class Comparison(Record):
    __slots__ = ("confirmed", "proposed", "differences")
    confirmed: bool
    proposed: str  # the measured list, in the row's own notation where it can say it
    differences: tuple[str, ...]  # "SASS sm_101 in the wheel, not in the row", ...


def measure(kernels: list[Kernels]) -> Measured:
    """The union of the entries of `kernels` (one per library that counts)."""
    sass: set[CC] = set()
    ptx: set[CC] = set()
    specific: set[str] = set()
    for found in kernels:
        for arch in found.sass:
            cc, suffix = split_arch(arch)
            if suffix == "a":
                specific.add(arch)
            else:
                sass.add(cc)
        for arch in found.ptx:
            cc, suffix = split_arch(arch)
            if suffix == "a":
                specific.add(arch)
            else:
                ptx.add(cc)
    return Measured(sass=frozenset(sass), ptx=frozenset(ptx), specific=tuple(sorted(specific, key=arch_key)))


def _sm(cc: CC) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def arch_text(measured: Measured, like: str) -> str:
    """The measured list written in the notation of `like` (the row's current text): TORCH_CUDA_ARCH_LIST
    ("7.5;8.0;12.0+PTX") when the row uses it and every PTX has SASS of its capability (that notation
    cannot say PTX alone), else nvcc ("sm_75,sm_80,compute_120")."""
    torch_style = not any(
        part.strip().lower().startswith(("sm", "compute")) for part in like.replace(",", ";").split(";")
    )
    if torch_style and measured.ptx <= measured.sass:
        return ";".join(
            format_cc(cc) + ("+PTX" if cc in measured.ptx else "") for cc in sorted(measured.sass)
        )
    return ",".join(
        [_sm(cc) for cc in sorted(measured.sass)] + [f"compute_{cc[0]}{cc[1]}" for cc in sorted(measured.ptx)]
    )


def compare(row_arch: str, measured: Measured) -> Comparison:
    """Whether the wheel's kernels are exactly the row's arch list, and what the row should say."""
    row = parse_arch_list(row_arch)
    differences = []
    for kind, have, claimed in (("SASS", measured.sass, row.sass), ("PTX", measured.ptx, row.ptx)):
        prefix = "sm" if kind == "SASS" else "compute"
        for cc in sorted(have - claimed):
            differences.append(f"{kind} {prefix}_{cc[0]}{cc[1]} in the wheel, not in the row")
        for cc in sorted(claimed - have):
            differences.append(f"{kind} {prefix}_{cc[0]}{cc[1]} in the row, not in the wheel")
    confirmed = not differences
    return Comparison(
        confirmed=confirmed,
        proposed=row_arch if confirmed else arch_text(measured, row_arch),
        differences=tuple(differences),
    )
