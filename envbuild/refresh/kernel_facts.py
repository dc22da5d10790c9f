"""A matrix row's arch list against the kernels measured in its wheels: confirmed, or the correction.

The row's `arch` (envbuild.matrix.arch grammar) is the build's arch list: the architectures every
kernel was compiled for. The fatbins say more than that: torch 2.8's libtorch_cuda.so carries 393
cubins for each of its seven listed archs, plus one sm_89 cubin (a single special kernel), and its
libtorch_cuda_linalg.so is built for another list. A union of everything would tell a Maxwell GPU it
has kernels when only linear algebra does. So the measured list is the *main set* of the library
with the most entries (the framework's core kernels): the archs present in at least half as many
entries as its most common arch. Everything else is reported in the note, never written into
`arch`. `a`-suffixed entries (sm_90a) run on exactly one capability and the grammar cannot say so:
they are reported too. `f` entries (sm_100f) run on their family like plain SASS and count as such.
"""

from __future__ import annotations

from collections import Counter

from envbuild._util.record import Record
from envbuild.audit.kernels import arch_key
from envbuild.audit.verdict import split_arch
from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.versions import format_cc

CC = tuple[int, int]


class Measured(Record):
    __slots__ = ("sass", "ptx", "specific", "extra")
    sass: frozenset[CC]
    ptx: frozenset[CC]
    specific: tuple[str, ...]  # "sm_90a"... entries only the exact capability runs
    extra: tuple[str, ...]  # "sm_89 (1 of 393 in libtorch_cuda.so)": entries outside the main set


class Comparison(Record):
    __slots__ = ("confirmed", "proposed", "differences")
    confirmed: bool
    proposed: str  # the measured list, in the row's own notation where it can say it
    differences: tuple[str, ...]  # "SASS sm_101 in the wheel, not in the row", ...


def _plain(arch: str) -> tuple[str, CC, str]:
    """ "sm_100f" -> ("sm", (10, 0), "f"); "compute_90" -> ("compute", (9, 0), "")."""
    cc, suffix = split_arch(arch)
    return arch.split("_", 1)[0], cc, suffix


def measure(libraries: dict[str, Counter[str]]) -> Measured:
    """The main set of the library with the most entries; `libraries` maps each library that counts
    (its path) to how many fatbin entries it has per architecture ("sm_90": 274, "compute_90": 273)."""
    core = max(libraries, key=lambda path: (sum(libraries[path].values()), path))
    counts = libraries[core]
    top = max(counts.values())
    sass: set[CC] = set()
    ptx: set[CC] = set()
    specific: set[str] = set()
    extra: set[str] = set()
    for path, found in libraries.items():
        name = path.rsplit("/", 1)[-1]
        for arch, count in found.items():
            kind, cc, suffix = _plain(arch)
            if suffix == "a":
                specific.add(arch)
            elif path == core and 2 * count >= top:
                (sass if kind == "sm" else ptx).add(cc)
            elif path == core:
                extra.add(f"{arch} ({count} of {top} in {name})")
    for path, found in libraries.items():
        if path == core:
            continue
        main = {a for a, count in found.items() if 2 * count >= max(found.values())}
        plain = {(_plain(a)[0], _plain(a)[1]) for a in main if _plain(a)[2] != "a"}
        mine = {("sm", cc) for cc in sass} | {("compute", cc) for cc in ptx}
        if plain != mine:
            listed = ",".join(sorted(main, key=arch_key))
            extra.add(f"{path.rsplit('/', 1)[-1]} is built for {listed}")
    return Measured(
        sass=frozenset(sass),
        ptx=frozenset(ptx),
        specific=tuple(sorted(specific, key=arch_key)),
        extra=tuple(sorted(extra)),
    )


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
