"""Which libraries of the matrix's `nvidia-*` wheels cuobjdump reads whole, partly or not at all.

cuobjdump 13 stops partway through some NVIDIA libraries of older CUDA releases (cuBLAS 12.4.5.8's
libcublas.so.12 after 1,404 entries with "Invalid ELF"; cuBLAS 11 at its sm_35 entries). The audit
judges such a library by what was listed (envbuild.audit.kernels); this module measures, for every
`nvidia-*` wheel family the matrix's PyPI rows install, which libraries that happens to, so a team
knows before it builds which of its CUDA libraries an audit reads only in part, and why.

- **The families:** every (package, version) a [[build]] of matrix/requirements.toml requires: an
  exact pin (`==12.4.5.8`, torch's) as written, a range (JAX's, TensorFlow's `>=`) as the newest
  release PyPI has for it (what a fresh install gets), plus any the maintainer names (`also`).
- **The reading:** the Linux x86_64 wheel of each, from PyPI's file host by range requests
  (envbuild.refresh.members): only its shared objects, one at a time, each deleted once cuobjdump
  has listed it, so a 700 MB cuDNN wheel never holds more than its largest library on disk.
- **The table:** one row per wheel in matrix/README.md, between the TABLE_BEGIN and TABLE_END
  markers, naming the wheel by file name and sha256 and the cuobjdump that read it. It is written and read
  here (`table_rows`), so the replay test compares a fresh reading with the committed row.

bench/cuda_wheels.py runs it against PyPI and updates the table.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable

from envbuild._util.record import Record
from envbuild.audit.kernels import cuobjdump_version, read_kernels
from envbuild.audit.tree import is_shared_object_name
from envbuild.errors import EnvbuildError
from envbuild.refresh.members import each_member
from envbuild.refresh.upstream import DistFile, Http

TABLE_BEGIN = "<!-- cuda-wheels:begin (written by bench/cuda_wheels.py; do not edit by hand) -->"
TABLE_END = "<!-- cuda-wheels:end -->"
HEADER = (
    "| package | version | read whole | read partly | not read | no device code | cuobjdump | installed by |"
)
_RULE = "|---|---|---|---|---|---|---|---|"
_SEPARATOR = "<br>"
_NONE = "-"
_WHEEL_RE = re.compile(
    r'^\[(?P<version>[^\]]+)\]\((?P<url>https://\S+) "(?P<file>\S+\.whl) sha256:(?P<sha>[0-9a-f]{64})"\)$'
)
_VERSION_RE = re.compile(r"^cuobjdump \d+\.\d+ \(V(?P<full>[\w.]+)\) ")
_REASON_RE = re.compile(r"^(?P<name>\S+) \((?P<reason>.*)\)$")
_CANONICAL_RE = re.compile(r"[-_.]+")

WHOLE, PARTLY, NOT_READ, NO_DEVICE_CODE = "whole", "partly", "not read", "no device code"


def canonical(name: str) -> str:
    return _CANONICAL_RE.sub("-", name).lower()


def wheel_key(filename: str) -> tuple[str, str]:
    """(canonical package, version) of a wheel's file name."""
    name, version = filename.split("-")[:2]
    return canonical(name), version


class Family(Record):
    """One (package, version) some matrix rows install; `wanted_by`: "torch 2.6.0 cu124"..."""

    __slots__ = ("package", "version", "wanted_by")
    package: str
    version: str
    wanted_by: tuple[str, ...]


class LibraryRead(Record):
    """One shared object of a wheel: how cuobjdump read it, and why it stopped (without its version,
    which the row says once)."""

    __slots__ = ("name", "read", "reason")
    name: str  # the file name (libcublas.so.12): unique within each nvidia-* wheel
    read: str  # WHOLE | PARTLY | NOT_READ | NO_DEVICE_CODE
    reason: str | None


class WheelRead(Record):
    __slots__ = ("package", "version", "filename", "sha256", "cuobjdump", "libraries", "wanted_by")
    package: str
    version: str
    filename: str  # the wheel's file name, and its sha256 as the index gave it
    sha256: str
    cuobjdump: str  # "13.5.37"
    libraries: tuple[LibraryRead, ...]  # sorted by name
    wanted_by: str  # the summary of the rows that install it

    def names(self, read: str) -> tuple[str, ...]:
        return tuple(library.name for library in self.libraries if library.read == read)


# ---------------------------------------------------------------------------------------------
# which families the matrix installs


def families(
    builds: Iterable[dict],
    newest: Callable[[str, str], str | None],
    also: Iterable[tuple[str, str, str]] = (),
) -> tuple[list[Family], list[str]]:
    """The distinct (package, version) pairs of every `nvidia-*` requirement of `builds`
    (matrix/requirements.toml's [[build]] tables), in the order first met, and what could not be
    settled. `newest(package, specifier)`: the newest release a range admits (PyPI's answer); `also`:
    (package, version, who installs it) for wheels no row names (torch's download.pytorch.org sets)."""
    found: dict[tuple[str, str], list[str]] = {}
    unsettled: list[str] = []
    for build in builds:
        row = f"{build['framework']} {build['version']} {build['variant']}"
        for package, specifier in (build.get("requires") or {}).items():
            if not package.startswith("nvidia-"):
                continue
            version = _pinned(specifier) or newest(package, specifier)
            if version is None:
                unsettled.append(f"{package}{specifier} ({row}): no release on PyPI admits it")
                continue
            found.setdefault((package, version), []).append(row)
    for package, version, who in also:
        found.setdefault((canonical(package), version), []).append(who)
    return [Family(package=p, version=v, wanted_by=tuple(rows)) for (p, v), rows in found.items()], unsettled


def _pinned(specifier: str) -> str | None:
    match = re.fullmatch(r"==\s*([0-9][0-9A-Za-z.+!]*)", specifier.strip())
    return match.group(1) if match and "*" not in specifier else None


def summarize(rows: Iterable[str]) -> str:
    """ "torch 2.5.0, 2.5.1, 2.6.0 cu124; jax 0.4.26-0.5.3 cuda12 (12 releases)": the rows that
    install a wheel, per framework and variant, in the order met."""
    grouped: dict[tuple[str, str], list[str]] = {}
    loose: list[str] = []
    for row in rows:
        parts = row.split(" ")
        if len(parts) != 3:
            loose.append(row)
            continue
        grouped.setdefault((parts[0], parts[2]), []).append(parts[1])
    said = []
    for (framework, variant), versions in grouped.items():
        unique = list(dict.fromkeys(versions))
        shown = (
            ", ".join(unique) if len(unique) <= 3 else f"{unique[0]}-{unique[-1]} ({len(unique)} releases)"
        )
        said.append(f"{framework} {shown} {variant}")
    return "; ".join(said + list(dict.fromkeys(loose)))


def pick_wheel(files: list[DistFile]) -> DistFile | None:
    """The Linux x86_64 wheel of an nvidia-* release (they are `py3-none-manylinux*_x86_64`)."""
    linux = [
        f
        for f in files
        if not f.yanked
        and f.filename.endswith(".whl")
        and "manylinux" in f.filename
        and "x86_64" in f.filename
    ]
    return sorted(linux, key=lambda f: f.filename)[0] if linux else None


# ---------------------------------------------------------------------------------------------
# reading one wheel


def short_reason(unread: str) -> str:
    """Why cuobjdump stopped, without the "cuobjdump 13.5 (V13.5.37) " its version starts with."""
    return _VERSION_RE.sub("", unread, count=1)


def version_number(binary: str) -> str:
    """ "13.5.37" of `cuobjdump 13.5 (V13.5.37)`."""
    match = re.search(r"\(V([\w.]+)\)", cuobjdump_version(binary))
    return match.group(1) if match else "unknown"


def library_member(name: str) -> bool:
    """Whether a wheel member is a shared object the table reads (libfoo.so, libfoo.so.12)."""
    return is_shared_object_name(os.path.basename(name))


def wheel_libraries(http: Http, url: str) -> tuple[str, ...]:
    """The file names of the shared objects in the wheel at `url`, sorted: its central directory
    only, by range requests (a few hundred KB of a wheel of any size)."""
    from envbuild.refresh.upstream import open_wheel

    wheel = open_wheel(http, url)
    with wheel.archive as archive:
        names = [m.filename for m in archive.infolist() if not m.is_dir() and library_member(m.filename)]
    return tuple(sorted(os.path.basename(name) for name in names))


def read_wheel(
    http: Http,
    url: str,
    binary: str,
    *,
    say: Callable[[str], None] | None = None,
    scratch: str | None = None,
) -> tuple[LibraryRead, ...]:
    """How cuobjdump reads each shared object of the wheel at `url`, read by range requests, one
    library at a time (each deleted after its listing), in a directory under `scratch` (default:
    the system's temporary directory; a memory-backed one spares the disk the gigabytes)."""
    reads: list[LibraryRead] = []
    with tempfile.TemporaryDirectory(prefix="envbuild-cuda-wheels-", dir=scratch) as scratch:
        for member in each_member(http, url, library_member, scratch):
            path = os.path.join(scratch, member)
            started = time.perf_counter()
            try:
                kernels = read_kernels(path, binary)
            except EnvbuildError as exc:  # check_elf: not an ELF object, or cut off
                reads.append(LibraryRead(name=os.path.basename(member), read=NOT_READ, reason=exc.message))
                continue
            finally:
                size = os.path.getsize(path) if os.path.exists(path) else 0
                os.remove(path)
            if kernels.not_read:
                read, reason = NOT_READ, short_reason(kernels.unread or "")
            elif kernels.partly_read:
                read, reason = PARTLY, short_reason(kernels.unread or "")
            elif kernels.has_device_code:
                read, reason = WHOLE, None
            else:
                read, reason = NO_DEVICE_CODE, None
            if say:
                seconds = time.perf_counter() - started
                say(f"  {os.path.basename(member)}: {read} ({size >> 20} MB, {seconds:.1f} s)")
            reads.append(LibraryRead(name=os.path.basename(member), read=read, reason=reason))
    names = [r.name for r in reads]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise EnvbuildError(
            f"{url} holds two libraries named {duplicates[0]}",
            fix="the table names libraries by file name; report it to envbuild",
        )
    return tuple(sorted(reads, key=lambda r: r.name))


def audited_reading(entry: dict) -> tuple[str, str | None]:
    """(reading, reason) of one library of an audit's record (record.json's audit.libraries: sass,
    ptx, unread), in the table's terms: what the same file's row must say."""
    unread = entry.get("unread")
    listed = bool(entry.get("sass") or entry.get("ptx"))
    if unread is None:
        return (WHOLE if listed else NO_DEVICE_CODE), None
    return (PARTLY if listed else NOT_READ), short_reason(unread)


# ---------------------------------------------------------------------------------------------
# the table in matrix/README.md


def _escape(text: str) -> str:
    """A cell's text: `|` and `\\` escaped for the table, `&` and `<` for the HTML of `<br>`."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _unescape(text: str) -> str:
    text = text.replace("&lt;", "<").replace("&amp;", "&")
    return re.sub(r"\\(.)", r"\1", text)


def _cell(items: list[str]) -> str:
    return _SEPARATOR.join(_escape(item) for item in items) or _NONE


def row_line(wheel: WheelRead) -> str:
    with_reason = {
        read: [f"{lib.name} ({lib.reason})" for lib in wheel.libraries if lib.read == read]
        for read in (PARTLY, NOT_READ)
    }
    page = release_page(wheel.package, wheel.version)
    cells = [
        wheel.package,
        f'[{wheel.version}]({page} "{wheel.filename} sha256:{wheel.sha256}")',
        _cell(list(wheel.names(WHOLE))),
        _cell(with_reason[PARTLY]),
        _cell(with_reason[NOT_READ]),
        _cell(list(wheel.names(NO_DEVICE_CODE))),
        wheel.cuobjdump,
        _escape(wheel.wanted_by) or _NONE,
    ]
    return "| " + " | ".join(cells) + " |"


def release_page(package: str, version: str) -> str:
    """Where PyPI lists the release's files: a mirror's file URLs are its own, this page is not."""
    return f"https://pypi.org/project/{package}/{version}/#files"


def _split_row(line: str) -> list[str]:
    cells, current, escaped = [], "", False
    for char in line.strip()[1:]:
        if escaped:
            current += "\\" + char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += char
    return cells


def _items(cell: str) -> list[str]:
    return [] if cell == _NONE else [_unescape(item) for item in cell.split(_SEPARATOR)]


def parse_row(line: str) -> WheelRead:
    cells = _split_row(line)
    if len(cells) != 8:
        raise ValueError(f"a table row has {len(cells)} cells, not 8: {line[:120]}")
    package, wheel, whole, partly, unread, plain, version, wanted = cells
    link = _WHEEL_RE.match(wheel)
    if link is None:
        raise ValueError(f'the version cell is not [VERSION](URL "WHEEL sha256:HEX"): {wheel[:120]}')
    libraries = [LibraryRead(name=n, read=WHOLE, reason=None) for n in _items(whole)]
    libraries += [LibraryRead(name=n, read=NO_DEVICE_CODE, reason=None) for n in _items(plain)]
    for read, cell in ((PARTLY, partly), (NOT_READ, unread)):
        for item in _items(cell):
            match = _REASON_RE.match(item)
            if match is None:
                raise ValueError(f"{read} cell item is not 'NAME (REASON)': {item[:120]}")
            libraries.append(LibraryRead(name=match.group("name"), read=read, reason=match.group("reason")))
    return WheelRead(
        package=package,
        version=link.group("version"),
        filename=link.group("file"),
        sha256=link.group("sha"),
        cuobjdump=version,
        libraries=tuple(sorted(libraries, key=lambda r: r.name)),
        wanted_by="" if wanted == _NONE else _unescape(wanted),
    )


def table_rows(text: str) -> dict[tuple[str, str], WheelRead]:
    """{(package, version): row} of the table in `text` (matrix/README.md); empty when it has none."""
    if TABLE_BEGIN not in text:
        return {}
    body = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    rows = {}
    for line in body.splitlines():
        if line.startswith("| ") and line != HEADER and not line.startswith("|---"):
            row = parse_row(line)
            rows[(row.package, row.version)] = row
    return rows


def intro(rows: Iterable[WheelRead], day: str) -> str:
    """The paragraph above the table: what it says, and its counts."""
    import textwrap

    rows = list(rows)
    partly = sum(1 for row in rows if row.names(PARTLY))
    unread = sum(1 for row in rows if row.names(NOT_READ))
    text = (
        f"Last written {day}: {len(rows)} wheels, {partly} with a library cuobjdump reads only partly and "
        f"{unread} with one it reads nothing of. Each wheel was read from PyPI by range requests (its "
        "shared objects only) and listed with the cuobjdump of the `nvidia-cuda-cuobjdump` wheel whose "
        "version the row gives; the version links to the release on PyPI, and its title names the "
        "file and its sha256. *Read partly*: cuobjdump listed entries, then stopped; the audit judges "
        "the library by what it listed. *Not read*: it listed nothing. The reason is cuobjdump's own "
        "last line."
    )
    return "\n".join(textwrap.wrap(text, 100))


def with_table(text: str, rows: Iterable[WheelRead], intro: str) -> str:
    """`text` with the table (between the markers, which must be there) replaced by `rows`, sorted
    by package and version."""
    from packaging.version import InvalidVersion, Version

    def key(row: WheelRead) -> tuple:
        try:
            return (row.package, 0, Version(row.version), "")
        except InvalidVersion:
            return (row.package, 1, Version("0"), row.version)

    if TABLE_BEGIN not in text or TABLE_END not in text:
        raise EnvbuildError(
            "matrix/README.md has no cuda-wheels table markers",
            fix=f"add a line {TABLE_BEGIN} and a line {TABLE_END} where the table goes",
        )
    head, rest = text.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    lines = [TABLE_BEGIN, intro, "", HEADER, _RULE, *(row_line(r) for r in sorted(rows, key=key)), TABLE_END]
    return head + "\n".join(lines) + tail
