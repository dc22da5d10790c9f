"""PEP 440 bounds of CUDA-family wheels (">=12.6.85", "<10.0,>=9.8", "==12.4.127"), as intervals.

The rules that keep a plan installable ask two questions of a requirement recorded in
matrix/requirements.toml: does it admit some release of CUDA X.Y (`==X.Y.*` intersected with it is
not empty), and does it admit the version an nvidia/cuda image bundles (cuDNN 9.1.0.70)? The
`packaging` library answers both, but importing it costs ~17 ms, more than the rest of a resolve,
and start-up time is a feature of `envbuild resolve`. These bounds only ever use release numbers and
the operators below, so they are read here as intervals of release tuples; anything else (a pre-,
post- or local version, `===`, an unknown operator) is handed to `packaging`, so the answer never
depends on the shortcut.
"""

from __future__ import annotations

import re
from functools import cache

_CLAUSE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")

Release = tuple[int, ...]
# an interval of releases: (low, low included, high, high included); None low/high is unbounded
Interval = tuple["Release | None", bool, "Release | None", bool]


def _norm(release: Release) -> Release:
    """PEP 440 compares releases padded with zeros: 12.4 == 12.4.0."""
    end = len(release)
    while end > 1 and release[end - 1] == 0:
        end -= 1
    return release[:end]


def _release(text: str) -> Release:
    return _norm(tuple(int(part) for part in text.split(".")))


def _next_prefix(prefix: Release) -> Release:
    """The first release after every X.Y.*: (12, 4) -> (12, 5)."""
    return _norm((*prefix[:-1], prefix[-1] + 1))


def _clauses(text: str) -> list[tuple[str, Release, bool]] | None:
    """(operator, release, wildcard) per clause; None when a clause is outside the simple subset."""
    found = []
    for part in text.split(","):
        if not part.strip():
            continue
        match = _CLAUSE.match(part)
        if match is None:
            return None
        op, version, star = match.groups()
        if star and op not in ("==", "!="):
            return None
        # a wildcard keeps its trailing zeros: ==12.0.* is the prefix (12, 0), not (12,)
        raw = tuple(int(p) for p in version.split("."))
        if op == "~=" and len(raw) < 2:
            return None
        found.append((op, raw if star or op == "~=" else _norm(raw), bool(star)))
    return found


def _interval(op: str, release: Release, star: bool) -> Interval | None:
    """The clause as one interval; None for `!=` (it removes a point or a prefix, never a range)."""
    if op == "==" and star:
        return (_norm(release), True, _next_prefix(release), False)
    if op == "==":
        return (release, True, release, True)
    if op == ">=":
        return (release, True, None, False)
    if op == ">":
        return (release, False, None, False)
    if op == "<=":
        return (None, False, release, True)
    if op == "<":
        return (None, False, release, False)
    if op == "~=":  # ~=9.8.0 is >=9.8.0,==9.8.* (the release as written, trailing zeros kept)
        return (_norm(release), True, _next_prefix(release[:-1]), False)
    return None


def _meet(intervals: list[Interval]) -> Interval:
    low: Release | None = None
    low_in = True
    high: Release | None = None
    high_in = True
    for lo, lo_in, hi, hi_in in intervals:
        if lo is not None and (low is None or lo > low or (lo == low and not lo_in)):
            low, low_in = lo, lo_in
        if hi is not None and (high is None or hi < high or (hi == high and not hi_in)):
            high, high_in = hi, hi_in
    return (low, low_in, high, high_in)


def _empty(interval: Interval) -> bool:
    low, low_in, high, high_in = interval
    if low is None or high is None:
        return False
    return low > high or (low == high and not (low_in and high_in))


def _excluded(release: Release, clause: tuple[str, Release, bool]) -> bool:
    op, excluded, star = clause
    if op != "!=":
        return False
    padded = release + (0,) * max(0, len(excluded) - len(release))
    return padded[: len(excluded)] == excluded if star else _norm(release) == excluded


@cache  # a resolve asks the same (bound, X.Y) question for every candidate of a release
def admits_prefix(text: str, prefix: tuple[int, ...]) -> bool:
    """Whether some release X.Y.* (any depth below the prefix) satisfies the specifier `text`.

    ">=12.6.85" admits (12, 6) and (12, 8) but not (12, 4); "" admits everything."""
    clauses = _clauses(text)
    if clauses is None:
        return _packaging_admits_prefix(text, prefix)
    wanted = _interval("==", prefix, True)
    assert wanted is not None
    bounds = [i for c in clauses if (i := _interval(*c)) is not None]
    meet = _meet([wanted, *bounds])
    if _empty(meet):
        return False
    low, _, high, _ = meet
    if low is not None and low == high:  # a single release: a `!=` may remove exactly it
        return not any(_excluded(low, c) for c in clauses)
    # a range holds more releases than one `!=` removes, unless it excludes a prefix holding all of it
    for op, excluded, star in clauses:
        if op == "!=" and star:
            gone = _interval("==", excluded, True)
            assert gone is not None
            if _meet([meet, gone]) == meet:
                return False
    return True


def contains(text: str, version: str) -> bool:
    """Whether the specifier `text` admits `version` ("9.1.0.70" in ">=9.8,<10.0" is False)."""
    clauses = _clauses(text)
    if clauses is None or not re.fullmatch(r"\d+(\.\d+)*", version):
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(text).contains(version, prereleases=True)
    release = _release(version)
    raw = tuple(int(p) for p in version.split("."))
    for op, bound, star in clauses:
        if star:
            inside = raw[: len(bound)] + (0,) * max(0, len(bound) - len(raw)) == bound
            if inside != (op == "=="):
                return False
            continue
        if op == "!=":
            if release == bound:
                return False
            continue
        interval = _interval(op, bound, False)
        assert interval is not None
        if _empty(_meet([interval, (release, True, release, True)])):
            return False
    return True


def exact(text: str) -> str | None:
    """The version of a specifier that names one release ("==9.1.0.70" -> "9.1.0.70"), else None."""
    clauses = [c.strip() for c in text.split(",") if c.strip()]
    if len(clauses) == 1:
        match = re.fullmatch(r"===?\s*(\d+(?:\.\d+)*)", clauses[0])
        if match:
            return match.group(1)
    return None


def _packaging_admits_prefix(text: str, prefix: tuple[int, ...]) -> bool:
    """The slow path: probe the prefix's first release, its last, and every release the specifier
    names inside the prefix together with its successor."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    specifier = SpecifierSet(text)
    base = ".".join(str(p) for p in prefix)
    probes = {f"{base}.0", f"{base}.99999999"}
    for item in specifier:
        try:
            named = Version(item.version.rstrip(".*"))
        except InvalidVersion:
            continue
        if named.release[: len(prefix)] == prefix:
            probes.add(str(named))
            probes.add(".".join(str(p) for p in (*named.release[:-1], named.release[-1] + 1)))
    return any(specifier.contains(probe, prereleases=True) for probe in probes)
