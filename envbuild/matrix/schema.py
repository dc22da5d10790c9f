"""The schema of matrix/*.toml, checked on every fresh parse.

Declarative on purpose: matrix/README.md documents the same tables, and a contributor adding a row
gets an error naming the file, the row and the key, with a "did you mean" for typos, instead of a
KeyError deep in the resolver.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.platforms import PLATFORMS
from envbuild.matrix.versions import parse_compute_capability, parse_driver_floor, parse_minor, parse_patch

CONFIDENCE_LEVELS = ("secondary", "unconfirmed", "disputed")
BRANCH_TYPES = ("LTSB", "PB", "NFB", "dev")
CUDA_FROM = ("wheels", "system")
OS_FAMILIES = ("ubuntu", "debian")
CUDA_FAMILY = ("nvidia-", "cuda-", "tensorrt")  # requirements.toml records these names only
_DIST_RE = re.compile(r"^[a-z0-9]+([-.][a-z0-9]+)*$")
_URL_RE = re.compile(r"^https?://[^\s/$.?#][^\s]*$")
# A name reaches tags, paths and RUN lines: letters, digits and _ . + - only (one character class,
# so matching is linear), and an empty string only where the field allows it (an empty extra).
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}")
# What a matrix value may never hold, whatever the field: characters that split a Dockerfile line or
# hide text (Unicode categories, as envbuild/spec/validate.py refuses them in a spec), and, in URLs,
# anything a shell would act on.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_SHELL_CHARS = frozenset(";|&$`'\"<>(){}\\")
_SHOWN = " ".join(sorted(_SHELL_CHARS))
MAX_TEXT = 4096  # the longest free-text value (a note, a label); rows today stay under 300
MAX_URL = 2048
_ARCH_SOURCE_RE = re.compile(r"^https?://[^\s#]+\.whl#sha256=[0-9a-f]{64}$")
_PY_RE = re.compile(r"^3\.\d{1,2}$")
_RELEASE_RE = re.compile(r"^\d+(\.\d+){1,3}(\.post\d+)?$")
_RANGE_RE = re.compile(r"^(\d+\.\d+)-(\d+\.\d+)$")
_MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_DAY_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")

Check = Callable[[Any], "str | None"]


def _unsafe_char(value: str) -> str | None:
    """The first character that would start a new Dockerfile line or hide text, described; one pass."""
    for ch in value:
        if unicodedata.category(ch) in _UNSAFE_CATEGORIES:
            shown = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL byte"}.get(ch, "")
            return f"contains {shown or 'a control or invisible character'} (U+{ord(ch):04X})"
    return None


def _text(value: Any) -> str | None:
    """Any string a matrix row holds: it may reach a Dockerfile comment or a label, where a line end
    would become an instruction of its own."""
    if not isinstance(value, str):
        return "expected a string"
    if len(value) > MAX_TEXT:
        return f"expected a string of at most {MAX_TEXT} characters"
    return _unsafe_char(value)


def _index_url(value: Any) -> str | None:
    """A plain http(s) URL: it is written into `RUN pip install --index-url`. Checked character by
    character (linear time, no backtracking regex) and refusing whatever a shell would act on."""
    accepted = "expected a plain http(s) URL like 'https://download.pytorch.org/whl/cu126'"
    if not isinstance(value, str) or len(value) > MAX_URL:
        return accepted
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or rest[0] in "/.?#@:":
        return accepted
    for ch in value:
        if ch in _SHELL_CHARS or ch.isspace() or not ch.isascii() or not ch.isprintable():
            return f"contains {ch!r}, which a shell would act on; {accepted} (no spaces, quotes, {_SHOWN})"
    host = rest.split("/", 1)[0]
    if "@" in host:
        return "contains a user name or password; keep credentials in ~/.netrc or a keyring"
    return None


def _image_reference(value: Any) -> str | None:
    """An image reference, by the one grammar the spec uses (Docker's, envbuild.oci.reference)."""
    from envbuild.errors import UsageError
    from envbuild.oci.reference import parse_reference

    accepted = "expected an image reference like 'ubuntu:22.04' or 'registry:5000/base/debian:bookworm'"
    if not isinstance(value, str) or value != value.strip() or _unsafe_char(value):
        return accepted
    if any(ch in _SHELL_CHARS for ch in value):
        return accepted
    try:
        parse_reference(value)
    except UsageError:
        return accepted
    return None


def _repository(value: Any) -> str | None:
    """An image repository: a reference without a tag or a digest."""
    from envbuild.errors import UsageError
    from envbuild.oci.reference import parse_reference

    problem = _image_reference(value)
    try:
        if problem is None and parse_reference(value).name == value:
            return None
    except UsageError:
        pass
    return "expected an image repository like 'nvidia/cuda' (no tag or digest)"


def _name(*, allow_empty: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, str) and (_NAME_RE.fullmatch(value) or (allow_empty and value == "")):
            return None
        return "expected a name: letters, digits and _ . + - (at most 63), like 'cu126' or 'ubuntu22.04'"

    return check


def _typed(kind: type, label: str) -> Check:
    def check(value: Any) -> str | None:
        if kind is int and isinstance(value, bool):
            return f"expected {label}"
        return None if isinstance(value, kind) else f"expected {label}"

    return check


def _parsed(parse: Callable[[str], object], label: str) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return f"expected a string ({label})"
        try:
            parse(value)
        except ValueError:
            return f"expected {label}"
        return None

    return check


def _matching(pattern: re.Pattern[str], label: str) -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, str) and pattern.match(value) else f"expected {label}"

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"expected one of {', '.join(choices)}"

    return check


def _list_of(item: Check, label: str, *, allow_empty: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list) or (not value and not allow_empty):
            return f"expected a {'' if allow_empty else 'non-empty '}list of {label}"
        for element in value:
            problem = item(element)
            if problem:
                return f"{element!r}: {problem}"
        return None

    return check


def _cc(value: Any) -> str | None:
    if isinstance(value, str) and "." in value and parse_compute_capability(value):
        return None
    return 'expected a compute capability like "8.9"'


def _cuda_range(value: Any) -> str | None:
    match = _RANGE_RE.match(value) if isinstance(value, str) else None
    if not match or parse_minor(match.group(1)) > parse_minor(match.group(2)):
        return 'expected an inclusive CUDA range like "11.0-11.8"'
    return None


def _specifier(value: Any) -> str | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # on a fresh parse only

    if not isinstance(value, str):
        return 'expected a PEP 440 specifier string like ">=12.6.85" or "<10.0,>=9.8"'
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return 'expected a PEP 440 specifier like ">=12.6.85" or "<10.0,>=9.8"'
    return None


def _requires(value: Any) -> str | None:
    """canonical CUDA-family name -> specifier, as `matrix refresh --requirements` writes it."""
    from packaging.utils import canonicalize_name

    if not isinstance(value, dict):
        return 'expected a table of package name -> specifier, like "nvidia-cudnn-cu12" = ">=9.8,<10.0"'
    for name, spec in value.items():
        if canonicalize_name(name) != name:
            return f"{name!r} is not a canonical package name (write {canonicalize_name(name)!r})"
        if not name.startswith(CUDA_FAMILY):
            return f"{name!r} is not a CUDA-family package (names start with {', '.join(CUDA_FAMILY)})"
        problem = _specifier(spec)
        if problem:
            return f"{name} = {spec!r}: {problem}"
    return None


STR = _text
GPU_SEGMENTS = ("data-center", "workstation", "geforce", "jetson")
NAME = _name()
OPTIONAL_NAME = _name(allow_empty=True)  # an extra may be "" (the plain package)
NAMES = _list_of(NAME, "names", allow_empty=True)
INDEX_URL = _index_url
IMAGE = _image_reference
INT = _typed(int, "an integer")
BOOL = _typed(bool, "true or false")
URL = _matching(_URL_RE, "an http(s) URL of the primary source")
MONTH = _matching(_MONTH_RE, 'a month "YYYY-MM" like "2026-06"')
DAY = _matching(_DAY_RE, 'a date "YYYY-MM-DD" like "2026-11-29"')
MINOR = _parsed(parse_minor, 'an X.Y version like "12.4"')
PATCH = _parsed(parse_patch, 'an X.Y.Z version like "12.4.1"')
DRIVER = _parsed(parse_driver_floor, 'a driver version like "550.54.14"')
ARCH = _parsed(parse_arch_list, 'an arch list like "8.0;9.0+PTX" or "sm_80,compute_90"')
ARCH_SOURCE = _matching(_ARCH_SOURCE_RE, 'the audited wheel as "https://.../NAME.whl#sha256=<64 hex>"')
WHEEL_SOURCE = _matching(
    _ARCH_SOURCE_RE, 'the wheel whose METADATA was read, as "https://.../NAME.whl#sha256=<64 hex>"'
)
PYTHON = _list_of(_matching(_PY_RE, 'a Python X.Y like "3.11"'), "Python X.Y strings")
RELEASE_VERSIONS = _list_of(_matching(_RELEASE_RE, "a release version"), "release versions")
STRINGS = _list_of(STR, "strings", allow_empty=True)
# canonical names only (`linux/arm64`, not `aarch64`): the matrix is read by people and by `grep`
PLATFORM_LIST = _list_of(_one_of(tuple(PLATFORMS)), "platforms")
# where a row says which platforms it publishes for: the PyPI file list, the index, the image repo
PLATFORM_FIELDS = {"platforms": (PLATFORM_LIST, False), "platforms_source": (URL, False)}


def _per_platform(item: Check, label: str) -> Check:
    """A table of canonical platform -> value, as `arch_by_platform = { "linux/arm64" = "8.0;9.0" }`."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict) or not value:
            return f'expected a table of platform -> {label}, like {{ "linux/arm64" = ... }}'
        for platform, element in value.items():
            if platform not in PLATFORMS:
                return f"{_shown(platform)} is not a platform (write one of: {', '.join(PLATFORMS)})"
            problem = item(element)
            if problem:
                return f"{platform} = {_shown(element)}: {problem}"
        return None

    return check


# a framework build whose kernel list differs by platform: the list, and where each was read
ARCH_BY_PLATFORM = _per_platform(ARCH, "arch list")
ARCH_BY_PLATFORM_SOURCE = _per_platform(URL, "source URL (a build script, RELEASE.md or the audited wheel)")

PROVENANCE = {"source": (URL, True), "confidence": (_one_of(CONFIDENCE_LEVELS), False), "note": (STR, False)}

# table name -> key -> (check, required); "array" marks [[tables]], else a single [table].
TABLES: dict[str, dict[str, tuple[Check, bool]]] = {
    "cuda": {
        "version": (PATCH, True),
        "label": (STR, True),
        "ga": (BOOL, False),
        "min_driver": (DRIVER, False),
        **PROVENANCE,
    },
    "minor_compat": {"cuda_major": (INT, True), "min_driver": (DRIVER, True), **PROVENANCE},
    "branch": {
        "branch": (INT, True),
        "native_cuda": (MINOR, True),
        "type": (_one_of(BRANCH_TYPES), True),
        "eol": (MONTH, False),
        **PROVENANCE,
    },
    "cudnn": {
        "version": (MINOR, True),
        "cuda": (_list_of(_cuda_range, 'CUDA ranges like "12.0-12.2"'), True),
        "min_compute_capability": (_cc, False),
        **PROVENANCE,
    },
    "image": {
        "cuda": (PATCH, True),
        "os": (_list_of(NAME, "OS names"), True),
        "cudnn_os": (NAMES, False),
        "cudnn_tag": (_one_of(("cudnn8", "cudnn9", "cudnn")), False),
        "cudnn": (STR, False),
        "nccl": (STR, False),
        "eol": (MONTH, False),
        "deleted": (DAY, False),
        **PLATFORM_FIELDS,
        **PROVENANCE,
    },
    "image_policy": {
        "repository": (_repository, True),
        "delete_after_months": (INT, True),
        **PROVENANCE,
    },
    "gpu": {
        "name": (STR, True),
        "aliases": (STRINGS, False),
        "compute_capability": (_cc, True),
        "architecture": (STR, True),
        "first_cuda": (MINOR, True),
        "data_center": (BOOL, False),
        "max_driver_branch": (INT, False),
        "host_platforms": (PLATFORM_LIST, False),  # absent: any host
        "integrated": (BOOL, False),  # Jetson/Tegra: a JetPack/L4T stack, not envbuild's
        "integrated_stack": (STR, False),  # what to use instead, named in the refusal
        # which of NVIDIA's lists the GPU is on: "data-center", "workstation", "geforce" or "jetson"
        "segment": (_one_of(GPU_SEGMENTS), False),
        # a SKU that launched after its architecture's first CUDA and needs a later driver (its release
        # notes name the first branch that supports it); absent: the branch of first_cuda's driver
        "min_driver_branch": (INT, False),
        # what the smoke step and training can use: bf16/fp16 arithmetic and the memory sizes sold (GB)
        "bf16": (BOOL, False),
        "fp16": (BOOL, False),
        "memory_gb": (_list_of(_typed(int, "an integer"), "integers"), False),
        **PROVENANCE,
    },
    "os": {
        "name": (NAME, True),
        "image": (IMAGE, True),
        "family": (_one_of(OS_FAMILIES), True),
        "python": (MINOR, True),
        "glibc": (MINOR, True),
        **PROVENANCE,
    },
    "framework": {
        "name": (NAME, True),
        "display_name": (STR, True),
        "package": (NAME, True),
        "aliases": (NAMES, False),
        "conda_packages": (NAMES, False),
        **PLATFORM_FIELDS,
        **PROVENANCE,
    },
    "release": {
        "versions": (RELEASE_VERSIONS, True),
        "python": (PYTHON, True),
        "pypi_variant": (NAME, False),
        "variant": (None, True),
        **PLATFORM_FIELDS,
        **PROVENANCE,
    },  # type: ignore[dict-item]
    "build": {  # requirements.toml: one framework build's METADATA requirements
        "framework": (NAME, True),
        "version": (_matching(_RELEASE_RE, 'one framework release, like "0.10.2"'), True),
        "variant": (NAME, True),
        "wheel": (_matching(_DIST_RE, 'the distribution read, canonical, like "jax-cuda12-plugin"'), True),
        "extra": (OPTIONAL_NAME, True),
        "source": (WHEEL_SOURCE, True),
        "requires": (_requires, True),
    },
    "variant": {
        "name": (NAME, True),
        "cuda": (MINOR, False),
        "cuda_min": (MINOR, False),
        "cudnn": (STR, False),
        "nccl": (STR, False),
        "index_url": (INDEX_URL, True),
        "extra": (OPTIONAL_NAME, False),
        "cuda_from": (_one_of(CUDA_FROM), True),
        "arch": (ARCH, True),
        "arch_source": (ARCH_SOURCE, False),  # set when the arch list was measured from that wheel
        # where a platform's wheels carry another list (PyTorch's aarch64 builds: 8.0 and up), with
        # a source for each platform's list; every key is one of the variant's platforms (matrix check)
        "arch_by_platform": (ARCH_BY_PLATFORM, False),
        "arch_by_platform_source": (ARCH_BY_PLATFORM_SOURCE, False),
        **PLATFORM_FIELDS,
        **PROVENANCE,
    },
}

# file kind -> top-level tables it may hold, and whether each is an array of tables.
FILE_TABLES: dict[str, dict[str, bool]] = {
    "drivers": {"cuda": True, "minor_compat": True, "branch": True},
    "cuda": {"cudnn": True, "image": True, "image_policy": False},
    "gpus": {"gpu": True},
    "os": {"os": True},
    "framework": {"framework": False, "release": True},
    "requirements": {"build": True},
}

# tables a file may leave out (older matrices written before they existed)
OPTIONAL_TABLES = frozenset({"image_policy"})

_LABEL_KEYS = ("version", "name", "branch", "cuda_major", "cuda", "versions")


def _shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut to its first 80 characters when longer than 200,
    so a 1 MB name is not printed whole into every error of its row."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:80]}… ({len(text):,} characters)"


def _longest(value: Any, depth: int = 0) -> int:
    """The length of the longest string in `value` (a string, or strings in lists and tables)."""
    if isinstance(value, str):
        return len(value)
    if depth > 8:  # matrix rows nest two levels; deeper is refused by the field's own check
        return 0
    if isinstance(value, list):
        return max((_longest(item, depth + 1) for item in value), default=0)
    if isinstance(value, dict):
        return max((_longest(item, depth + 1) for item in (*value, *value.values())), default=0)
    return 0


def _too_long(value: Any) -> str | None:
    """Every matrix string is bounded by limits.FIELD_CHARACTERS before any check reads it, so a
    1 MB value is refused at once, naming the field and the limit (issue 33)."""
    from envbuild._util.limits import FIELD_CHARACTERS

    most = FIELD_CHARACTERS.get()
    longest = _longest(value)
    if longest > most:
        return f"holds a string of {longest:,} characters, more than the {most:,} a matrix field may hold"
    return None


def _build_label(index: int, row: dict[str, Any]) -> str:
    """requirements.toml rows are named by all three keys: "jax 0.10.2 cuda12"."""
    named = " ".join(
        text if len(text := str(row.get(k, "?"))) <= 80 else text[:80] + "…"
        for k in ("framework", "version", "variant")
    )
    return f"[[build]] #{index + 1} ({named})"


def _row_label(table: str, index: int | None, row: dict[str, Any]) -> str:
    where = f"[[{table}]] #{index + 1}" if index is not None else f"[{table}]"
    for key in _LABEL_KEYS:
        if key in row:
            return f"{where} ({key} = {_shown(row[key])})"
    return where


def _did_you_mean(key: str, allowed: list[str]) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(key, allowed, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(sorted(allowed))}"


def validate_row(table: str, row: Any, where: str) -> list[str]:
    if not isinstance(row, dict):
        return [f"{where}: expected a table"]
    fields = TABLES[table]
    errors = []
    for key in row:
        if key not in fields:
            hint = _did_you_mean(key, list(fields)) if len(key) <= 200 else ""
            errors.append(f"{where}: unknown key {_shown(key)}{hint}")
    for key, (check, required) in fields.items():
        if key not in row:
            if required:
                errors.append(f"{where}: missing required key {key!r}")
            continue
        problem = _too_long(row[key])
        if problem:
            errors.append(f"{where}: {key} {problem}")
            continue
        if check is None:
            continue
        problem = check(row[key])
        if problem:
            errors.append(f"{where}: {key} = {_shown(row[key])}: {problem}")
    return errors


def validate_file(kind: str, relpath: str, data: dict[str, Any]) -> list[str]:
    """All schema errors of one parsed file, each naming the file, row and key."""
    allowed = FILE_TABLES[kind]
    errors = []
    for key in data:
        if key not in allowed:
            errors.append(f"{relpath}: unknown table {key!r}{_did_you_mean(key, list(allowed))}")
    for table, is_array in allowed.items():
        if table not in data:
            if table in OPTIONAL_TABLES:
                continue
            errors.append(
                f"{relpath}: missing table [{'[' if is_array else ''}{table}{']' if is_array else ''}]"
            )
            continue
        rows = data[table]
        if not is_array:
            errors += validate_row(table, rows, f"{relpath}: [{table}]")
            continue
        if not isinstance(rows, list):
            errors.append(f"{relpath}: {table} must be an array of tables [[{table}]]")
            continue
        seen_builds: dict[tuple[str, ...], str] = {}
        for index, row in enumerate(rows):
            fields = row if isinstance(row, dict) else {}
            label = _build_label(index, fields) if table == "build" else _row_label(table, index, fields)
            where = f"{relpath}: {label}"
            errors += validate_row(table, row, where)
            if table == "build" and isinstance(row, dict):
                errors += _once(row, where, seen_builds)
            if table == "release" and isinstance(row, dict):
                variants = row.get("variant")
                if not isinstance(variants, list) or not variants:
                    errors.append(f"{where}: needs at least one [[release.variant]]")
                    continue
                for v_index, variant in enumerate(variants):
                    label = _row_label(
                        "release.variant", v_index, variant if isinstance(variant, dict) else {}
                    )
                    errors += validate_row("variant", variant, f"{where} {label}")
                    if isinstance(variant, dict):
                        errors += _arch_sources(variant, f"{where} {label}")
                    if isinstance(variant, dict) and ("cuda" in variant) == ("cuda_min" in variant):
                        errors.append(
                            f"{where} {label}: give exactly one of 'cuda' (a fixed "
                            f"runtime) or 'cuda_min' (an open range of that major)"
                        )
    return errors


def _arch_sources(variant: dict[str, Any], where: str) -> list[str]:
    """Each per-platform arch list names its source, and no source stands for a list the row lacks."""
    lists = variant.get("arch_by_platform")
    sources = variant.get("arch_by_platform_source")
    lists = lists if isinstance(lists, dict) else {}
    sources = sources if isinstance(sources, dict) else {}
    errors = []
    for platform in lists:
        if platform not in sources:
            errors.append(
                f"{where}: arch_by_platform gives {platform} a list without a source; add "
                f'arch_by_platform_source = {{ "{platform}" = "https://..." }} (the build script, '
                f"RELEASE.md row or audited wheel it was read from)"
            )
    for platform in sources:
        if platform not in lists:
            errors.append(
                f"{where}: arch_by_platform_source names {platform}, which arch_by_platform does not list"
            )
    return errors


def _once(row: dict[str, Any], where: str, seen: dict[tuple[str, ...], str]) -> list[str]:
    """One requirements row per (framework, version, variant): a second would silently win."""
    build = tuple(str(row.get(k)) for k in ("framework", "version", "variant"))
    first = seen.setdefault(build, where)
    if first == where:
        return []
    return [f"{where}: the same build as {first.split(': ', 1)[-1]}; keep one row per build"]
