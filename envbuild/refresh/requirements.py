"""`envbuild matrix refresh --requirements`: the CUDA-family requirements each framework build declares.

For every build the matrix offers (each version of each [[release]] x each [[release.variant]]), this
reads the METADATA of the wheel the install really uses, by range requests (no full download), and
records every nvidia-* / cuda-* / tensorrt* requirement that applies on Linux x86_64 with the
variant's extra selected, citing the wheel as `URL#sha256=`. Which wheel that is:
  torch       the torch wheel itself, for the variant PyPI's own build carries (`pypi_variant`); the
              other variants live on download.pytorch.org, which the refresh does not read: no row;
  tensorflow  the tensorflow wheel with the variant's extra (`and-cuda`; none for system-CUDA builds);
  jax         jax's own wheel with the variant's extra (cuda12_pip, cuda12 up to 0.4.29), or, when that
              extra pulls `jax-cudaNN-plugin[with-cuda]`, the plugin's wheel with that extra.
A build without a row is "not measured": the rules then fall back to the variant's own fields.

The file is generated whole, rows sorted and values written one way, so a re-run without an
upstream change writes the same bytes (and `--write` then writes nothing).
"""

from __future__ import annotations

import os
import re
from typing import Any

from envbuild._util.record import Record
from envbuild.errors import NotFound
from envbuild.refresh.model import Edit, Finding, toml_string
from envbuild.refresh.pypi import _pick_wheel, newest_matching
from envbuild.refresh.upstream import DistFile, Http, pypi_releases, requires_dist, wheel_metadata

FILE = "requirements.toml"
_FAMILY = re.compile(r"^(nvidia-|cuda-|tensorrt)")
_PLUGIN = re.compile(r"^jax-cuda\d+-plugin$")
_OPERATORS = ("===", ">=", ">", "==", "~=", "<=", "<", "!=")  # lower bounds first, then upper, then holes
_PYPI_HOSTED = "pypi.org/simple"
HEADER = """\
# Written by `envbuild matrix refresh --requirements` (do not hand-edit bounds; every row cites its wheel)
#
# One [[build]] per (framework, version, variant) of matrix/frameworks/*.toml whose install wheel
# could be read: every CUDA-family requirement (nvidia-*, cuda-*, tensorrt*) of that wheel's METADATA
# that applies on Linux x86_64 (CPython of the cited wheel) with `extra` selected, as PEP 440
# specifiers. An empty [build.requires] means the METADATA declares none (a system-CUDA build).
# A build with no row was not measured; the rules then use the variant's own fields.
"""


class Build(Record):
    """One measured build: a row of requirements.toml."""

    __slots__ = ("framework", "version", "variant", "wheel", "extra", "source", "requires")
    framework: str
    version: str
    variant: str
    wheel: str  # the distribution whose METADATA was read
    extra: str  # the extra the install uses on that distribution ("" when none)
    source: str  # the wheel URL with #sha256=
    requires: dict[str, str]  # canonical name -> specifier, lower bounds first

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.framework, self.version, self.variant)


class Unread(Record):
    """A build the refresh could not measure, and why (the header counts them; no row)."""

    __slots__ = ("framework", "version", "variant", "reason")
    framework: str
    version: str
    variant: str
    reason: str


def order_specifier(text: str) -> str:
    """`<10.0,>=9.8` -> `>=9.8,<10.0`: one spelling whatever order packaging or METADATA used."""
    parts = [p.strip().replace(" ", "") for p in text.split(",") if p.strip()]

    def rank(part: str) -> tuple[int, str]:
        return next((i for i, op in enumerate(_OPERATORS) if part.startswith(op)), len(_OPERATORS)), part

    return ",".join(sorted(parts, key=rank))


def _environment(python: str, extra: str) -> dict[str, str]:
    return {
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "platform_release": "",
        "platform_version": "",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "implementation_version": f"{python}.0",
        "python_version": python,
        "python_full_version": f"{python}.0",
        "extra": extra,
    }


def applicable(requirements: list[str], python: str, extra: str) -> list[Any]:
    """The Requires-Dist entries pip installs for `pkg[extra]` on Linux x86_64 CPython `python`:
    the base requirements and the extra's own."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate(_environment(python, extra)):
            out.append(requirement)
    return out


def cuda_family(requirements: list[Any]) -> dict[str, str]:
    """canonical name -> ordered specifier; a name listed twice keeps both clauses (pip applies both)."""
    from packaging.utils import canonicalize_name

    found: dict[str, list[str]] = {}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if _FAMILY.match(name):
            found.setdefault(name, []).extend(str(s) for s in requirement.specifier)
    return {name: order_specifier(",".join(dict.fromkeys(specs))) for name, specs in sorted(found.items())}


def _python_of(wheel: DistFile, row: dict[str, Any]) -> str:
    """The CPython the wheel was built for (its markers are evaluated for it); for a pure wheel, 3.11
    when the row supports it, else the row's oldest Python."""
    match = re.search(r"-cp(\d)(\d+)-", wheel.filename)
    if match:
        return f"{match.group(1)}.{match.group(2)}"
    pythons = list(row.get("python") or [])
    return "3.11" if "3.11" in pythons or not pythons else pythons[0]


_FILE_HOST_PATH = re.compile(r"/packages/([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[^/?#]+)$")


def cited_url(url: str) -> str:
    """The wheel's URL on PyPI's file host when the path is PyPI's (`/packages/ab/cd/<blake2b>/<file>`),
    whichever mirror or proxy served it (one answers `../../packages/packages/...`), so the committed
    citation works for every reader; any other URL (a private index, the tests' loopback) as read."""
    match = _FILE_HOST_PATH.search(url.split("#", 1)[0])
    return f"https://files.pythonhosted.org/packages/{match.group(1)}" if match else url


def _source(wheel: DistFile) -> str | None:
    return f"{cited_url(wheel.url)}#sha256={wheel.sha256}" if wheel.sha256 else None


class RequirementsRefresh:
    """Measures every build of the matrix's framework files against a PyPI (JSON API + file host)."""

    def __init__(self, http: Http, pypi_url: str) -> None:
        self.http, self.pypi_url = http, pypi_url
        self.releases_cache: dict[str, dict[str, list[DistFile]]] = {}
        self.metadata_cache: dict[str, list[str]] = {}
        self.partly: dict[str, list[str]] = {}  # index_url off PyPI -> "version variant" measured without it

    def releases(self, project: str) -> dict[str, list[DistFile]]:
        if project not in self.releases_cache:
            self.releases_cache[project] = pypi_releases(self.http, self.pypi_url, project)
        return self.releases_cache[project]

    def requires(self, wheel: DistFile) -> list[str]:
        if wheel.url not in self.metadata_cache:
            self.metadata_cache[wheel.url] = requires_dist(wheel_metadata(self.http, wheel.url).text)
        return self.metadata_cache[wheel.url]

    def measure(self, frameworks: list[dict[str, Any]]) -> tuple[list[Build], list[Unread]]:
        builds: list[Build] = []
        unread: list[Unread] = []
        for data in frameworks:
            name, package = data["framework"]["name"], data["framework"]["package"]
            for row in data["release"]:
                for version in row["versions"]:
                    for variant in row["variant"]:
                        try:
                            result = self.one(name, package, version, row, variant)
                        except NotFound as exc:  # anything else (network, malformed) stops the refresh
                            result = exc.message
                        if isinstance(result, Build):
                            builds.append(result)
                            if _PYPI_HOSTED not in variant["index_url"] and name == "jax":
                                self.partly.setdefault(variant["index_url"], []).append(
                                    f"{version} {variant['name']}"
                                )
                        else:
                            unread.append(
                                Unread(
                                    framework=name, version=version, variant=variant["name"], reason=result
                                )
                            )
        return sorted(builds, key=_order), sorted(unread, key=_order)

    def one(
        self, name: str, package: str, version: str, row: dict[str, Any], variant: dict[str, Any]
    ) -> Build | str:
        """The measured build, or why it cannot be measured from this index."""
        extra = variant.get("extra") or ""
        if name == "torch":  # PyPI's torch wheel is the pypi_variant build; the rest are off PyPI
            if variant["name"] != row.get("pypi_variant"):
                return f"only on {variant['index_url']}, which the refresh does not read"
        elif name != "jax" and _PYPI_HOSTED not in variant["index_url"]:  # jax itself is always on PyPI
            return f"only on {variant['index_url']}, which the refresh does not read"
        wheel = _pick_wheel(self.releases(package).get(version, []))
        if wheel is None:
            return f"no Linux x86_64 wheel of {package} {version} on {self.pypi_url}"
        python = _python_of(wheel, row)
        applying = applicable(self.requires(wheel), python, extra)
        direct = cuda_family(applying)
        plugins = [r for r in applying if _PLUGIN.match(r.name.lower().replace("_", "-")) and r.extras]
        if name == "jax" and plugins:
            if direct or len(plugins) > 1:
                return f"{package} {version}[{extra}] splits its CUDA requirements over several wheels"
            return self._plugin(name, version, variant, plugins[0], row)
        source = _source(wheel)
        if source is None:
            return f"{self.pypi_url} gives no sha256 for {wheel.filename}"
        return Build(
            framework=name,
            version=version,
            variant=variant["name"],
            wheel=_canonical(package),
            extra=extra,
            source=source,
            requires=direct,
        )

    def _plugin(
        self, name: str, version: str, variant: dict[str, Any], plugin: Any, row: dict[str, Any]
    ) -> Build | str:
        project = _canonical(plugin.name)
        chosen = newest_matching(self.releases(project), str(plugin.specifier))
        wheel = _pick_wheel(self.releases(project).get(chosen or "", []))
        if wheel is None:
            return f"no Linux x86_64 wheel of {project}{plugin.specifier} on {self.pypi_url}"
        source = _source(wheel)
        if source is None:
            return f"{self.pypi_url} gives no sha256 for {wheel.filename}"
        extras = sorted(_canonical(e) for e in plugin.extras)
        requires: dict[str, list[str]] = {}
        for extra in extras:
            for key, spec in cuda_family(
                applicable(self.requires(wheel), _python_of(wheel, row), extra)
            ).items():
                requires.setdefault(key, []).append(spec)
        return Build(
            framework=name,
            version=version,
            variant=variant["name"],
            wheel=project,
            extra=",".join(extras),
            source=source,
            requires={
                k: order_specifier(",".join(dict.fromkeys(",".join(v).split(","))))
                for k, v in sorted(requires.items())
            },
        )


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def _order(item: Build | Unread) -> tuple[Any, ...]:
    from packaging.version import Version

    return (item.framework, Version(item.version), item.version, item.variant)


def render(builds: list[Build], unread: list[Unread], partly: dict[str, list[str]] | None = None) -> str:
    """The whole file: the header (with what was not measured, and why, and the rows whose install
    also takes a wheel from an index the refresh does not read) and the rows."""
    lines = [HEADER.rstrip("\n")]
    for index_url, which in sorted((partly or {}).items()):
        lines.append("#")
        lines.append(
            f"# Read from jax's own METADATA on PyPI ({len(which)} row(s)); the jaxlib +cudaNN wheel these"
        )
        lines.append(f"# extras also install comes from {index_url},")
        lines.append("# which the refresh does not read:")
        lines += _wrapped(which)
    if unread:
        lines.append("#")
        lines.append(f"# Not measured: {len(unread)} build(s), no row:")
        reasons: dict[tuple[str, str], list[str]] = {}
        for item in unread:
            reasons.setdefault((item.framework, _reason_kind(item.reason)), []).append(
                f"{item.version} {item.variant}"
            )
        for (framework, reason), which in reasons.items():
            lines.append(f"#   {framework} ({len(which)}), {reason}:")
            lines += _wrapped(which)
    for build in builds:
        lines += [
            "",
            "[[build]]",
            f"framework = {toml_string(build.framework)}",
            f"version = {toml_string(build.version)}",
            f"variant = {toml_string(build.variant)}",
            f"wheel = {toml_string(build.wheel)}",
            f"extra = {toml_string(build.extra)}",
            f"source = {toml_string(build.source)}",
            "  [build.requires]",
        ]
        lines += [f"  {toml_string(name)} = {toml_string(spec)}" for name, spec in build.requires.items()]
    return "\n".join(lines) + "\n"


def _reason_kind(reason: str) -> str:
    """Group the header's list: the download.pytorch.org builds share one reason, whatever CUDA tag."""
    return re.sub(
        r"https://download\.pytorch\.org/whl/\S+", "https://download.pytorch.org/whl/<cuXYZ>", reason
    )


def _wrapped(items: list[str], width: int = 100) -> list[str]:
    lines, current = [], "#     "
    for item in items:
        piece = item + ", "
        if len(current) + len(piece) > width and current.strip() != "#":
            lines.append(current.rstrip())
            current = "#     "
        current += piece
    lines.append(current.rstrip().rstrip(","))
    return lines


def read_rows(path: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The rows of an existing requirements.toml, by key ({} when there is none yet)."""
    from envbuild._util import toml

    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        data = toml.loads(handle.read())
    return {(b["framework"], b["version"], b["variant"]): b for b in data.get("build", [])}


def findings(
    root: str,
    builds: list[Build],
    unread: list[Unread],
    pypi_url: str,
    day: str,
    partly: dict[str, list[str]] | None = None,
) -> list[Finding]:
    """An `add` finding per new, changed or dropped row (each carrying the whole new file as its
    edit, so --write writes it once), and one `flag` per framework naming what was not measured."""
    path = os.path.join(root, FILE)
    old_text = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            old_text = handle.read()
    old = read_rows(path)
    text = render(builds, unread, partly)
    edit = Edit(kind="replace-file", anchor="", text=text)
    out: list[Finding] = []

    def add(subject: str, detail: str, source: str) -> None:
        out.append(
            Finding(
                action="add", file=FILE, subject=subject, detail=detail, source=source, fetched=day, edit=edit
            )
        )

    new_keys = set()
    for build in builds:
        new_keys.add(build.key)
        subject = " ".join(build.key)
        before = old.get(build.key)
        if before is None:
            add(
                subject,
                f"new row: {len(build.requires)} CUDA-family requirement(s) of {build.wheel}"
                + (f"[{build.extra}]" if build.extra else ""),
                build.source,
            )
            continue
        changes = _changes(before, build)
        if changes:
            add(subject, "; ".join(changes), build.source)
    for key in sorted(set(old) - new_keys, key=lambda k: (k[0], k[2], k[1])):
        add(
            " ".join(key),
            "drop the row: the build is no longer offered by the matrix or no longer readable",
            str(old[key].get("source", "")),
        )
    if old_text is not None and old_text != text and not out:
        add(FILE, "rewrite the header (the list of builds not measured changed)", f"{pypi_url}/pypi")
    by_framework: dict[str, list[Unread]] = {}
    for item in unread:
        by_framework.setdefault(item.framework, []).append(item)
    for framework, items in by_framework.items():
        kinds = sorted({_reason_kind(i.reason) for i in items})
        out.append(
            Finding(
                action="flag",
                file=FILE,
                subject=f"{framework} requirements",
                detail=f"{len(items)} build(s) not measured (no row): " + "; ".join(kinds),
                source=f"{pypi_url}/pypi/{framework}/json",
                fetched=day,
                edit=None,
            )
        )
    return out


def _changes(before: dict[str, Any], build: Build) -> list[str]:
    changes = []
    for field in ("wheel", "extra", "source"):
        if before.get(field) != getattr(build, field):
            changes.append(f"{field} {getattr(build, field)} (was {before.get(field)})")
    old_requires = {k: str(v) for k, v in (before.get("requires") or {}).items()}
    for name in sorted(set(old_requires) | set(build.requires)):
        new, was = build.requires.get(name), old_requires.get(name)
        if new != was:
            changes.append(
                f"{name} {new if new is not None else '(dropped)'} (was {was if was is not None else 'none'})"
            )
    return changes
