"""Framework releases from PyPI: versions, Python wheels, Requires-Python and the CUDA pins.

The CUDA facts come from the wheel's own METADATA (Requires-Dist on nvidia-*-cuNN and cuda-toolkit),
read with range requests, because that is what `pip install` really installs; release notes and
docs sometimes say otherwise. What PyPI cannot tell (the arch list a wheel was compiled for) is left
for a human: a patch release joins its minor's row only when every fact PyPI can give matches it.
"""

from __future__ import annotations

import re
from typing import Any

from envbuild._util.record import Record
from envbuild.refresh.model import PROPOSAL_MARKER, Edit, Finding, toml_list, toml_string
from envbuild.refresh.upstream import DistFile, Http, pypi_releases, requires_dist, wheel_metadata


class Layout(Record):
    """How one framework publishes. python_from: the package whose cp wheels give the Python list;
    series: how many leading version parts a patch release shares with its row (torch 2.15.x: 2;
    jax 0.12.0.x: 3, because JAX ships new features in its third part)."""

    __slots__ = ("python_from", "series")
    python_from: str
    series: int


LAYOUTS = {
    "torch": Layout(python_from="torch", series=2),
    "tensorflow": Layout(python_from="tensorflow", series=2),
    "jax": Layout(python_from="jaxlib", series=3),
}
_CP_RE = re.compile(r"-cp(\d)(\d+)-cp\d+m?-(?:manylinux|linux)[^/]*x86_64\.whl$")  # cp37m: old ABI tag
_RUNTIME_RE = re.compile(r"^(nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit)$")  # CUDA 13 wheels drop -cuNN
_OPERATOR_ORDER = (">=", ">", "==", "~=", "<=", "<", "!=")
_FIELDS = ("cuda", "cuda_min", "cudnn", "nccl")


class ReleaseFacts(Record):
    __slots__ = ("python", "requires_python", "variants", "problems")
    python: list[str]
    requires_python: str | None
    variants: dict[str, dict[str, str]]  # variant name -> cuda / cuda_min / cudnn / nccl
    problems: list[str]  # facts that could not be read


def _version_key(version: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return None


def _linux_x86_64(files: list[DistFile]) -> list[DistFile]:
    return [f for f in files if not f.yanked and _CP_RE.search(f.filename)]


def python_versions(files: list[DistFile]) -> list[str]:
    """CPython X.Y of the Linux x86_64 wheels; free-threaded cp313t builds are left out."""
    found = {(int(m.group(1)), int(m.group(2))) for f in files if (m := _CP_RE.search(f.filename))}
    return [f"{major}.{minor}" for major, minor in sorted(found)]


def _pick_wheel(files: list[DistFile]) -> DistFile | None:
    """The wheel whose METADATA stands for the release: Linux x86_64 cp311 if there is one (what the
    Debian/Ubuntu images run), else the newest CPython, else a pure-Python wheel."""
    linux = _linux_x86_64(files)
    for f in linux:
        if "-cp311-cp311-" in f.filename:
            return f
    if linux:
        return max(linux, key=lambda f: [int(x) for x in re.findall(r"-cp(\d)(\d+)-", f.filename)[0]])
    pure = [f for f in files if not f.yanked and f.filename.endswith("-none-any.whl")]
    return pure[0] if pure else None


def newest_matching(releases: dict[str, list[DistFile]], specifier: str) -> str | None:
    """The newest final release pip would pick for `specifier` (yanked-only releases excluded)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        allowed = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    candidates = [
        v for v, files in releases.items() if files and not all(f.yanked for f in files) and _version_key(v)
    ]
    matching = [v for v in candidates if _version_key(v) in allowed and not _version_key(v).is_prerelease]
    return max(matching, key=_version_key) if matching else None


def normalize_spec(text: str) -> str:
    """ "<10,>=9.3.0.75" and ">=9.3.0.75, <10" -> ">=9.3.0.75,<10"; "==9.26.0.51" -> "9.26.0.51"."""
    parts = [p.strip().replace(" ", "") for p in text.split(",") if p.strip()]

    def order(part: str) -> tuple[int, str]:
        for index, op in enumerate(_OPERATOR_ORDER):
            if part.startswith(op):
                return index, part
        return len(_OPERATOR_ORDER), part

    parts.sort(key=order)
    if len(parts) == 1 and parts[0].startswith("==") and "*" not in parts[0]:
        return parts[0][2:]
    return ",".join(parts)


def cuda_facts(requirements: list[str], extra: str | None) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(facts, plugin requirements) from Requires-Dist lines, evaluated for Linux x86_64 CPython 3.11
    with `extra` selected. Plugins are (name, specifier) pairs of `*-plugin[...]` requirements, whose
    own METADATA carries the pins (jax[cuda12] -> jax-cuda12-plugin[with-cuda])."""
    from packaging.requirements import InvalidRequirement, Requirement

    environment = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "python_version": "3.11",
        "python_full_version": "3.11.0",
        "implementation_name": "cpython",
        "extra": extra or "",
    }
    facts: dict[str, str] = {}
    plugins: list[tuple[str, str]] = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        if extra and (requirement.marker is None or "extra" not in str(requirement.marker)):
            continue  # with an extra selected, only what that extra adds
        name = requirement.name.lower().replace("_", "-")
        spec = normalize_spec(str(requirement.specifier))
        if _RUNTIME_RE.match(name):
            release = re.search(r"(\d+)\.(\d+)", spec)
            if release:
                fixed = spec[0].isdigit() or spec.startswith("==")
                facts["cuda" if fixed else "cuda_min"] = f"{release.group(1)}.{release.group(2)}"
        elif re.match(r"^nvidia-cudnn-cu\d+$", name):
            facts["cudnn"] = spec
        elif re.match(r"^nvidia-nccl-cu\d+$", name):
            facts["nccl"] = spec
        elif name.endswith("-plugin") and requirement.extras:
            plugins.append((name, str(requirement.specifier)))
    return facts, plugins


def same_fact(found: str, recorded: str | None) -> bool:
    """Equal as version constraints: "<10.0" is "<10", "9.3.0.75" is "==9.3.0.75"."""
    if recorded is None:
        return False
    return _clauses(found) == _clauses(recorded)


def _clauses(text: str) -> set[tuple[str, object]]:
    from packaging.version import InvalidVersion, Version

    clauses = set()
    for part in text.split(","):
        match = re.match(r"^\s*(>=|<=|==|~=|!=|>|<)?\s*(\S+?)\s*$", part)
        if not match:
            return {("text", text)}
        op, version = match.group(1) or "==", match.group(2)
        try:
            clauses.add((op, Version(version) if "*" not in version else version))
        except InvalidVersion:
            clauses.add((op, version))
    return clauses


def row_facts(variant: dict[str, Any]) -> dict[str, str]:
    return {k: normalize_spec(str(variant[k])) for k in _FIELDS if k in variant}


def pypi_variants(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The variants of a row that `pip install` from PyPI reaches with pinned CUDA wheels: the default
    build and the extras (a cuda_from = "system" build pins nothing to compare)."""
    return [
        v
        for v in row["variant"]
        if v["cuda_from"] == "wheels"
        and (v.get("extra") or (row.get("pypi_variant") and v["name"] == row["pypi_variant"]))
    ]


class FrameworkRefresh:
    """Compares one frameworks/<name>.toml with PyPI."""

    def __init__(self, http: Http, pypi_url: str, rel: str, data: dict[str, Any], text: str, day: str):
        self.http, self.pypi_url, self.rel, self.data, self.text, self.day = (
            http,
            pypi_url,
            rel,
            data,
            text,
            day,
        )
        self.head = data["framework"]
        self.name = self.head["name"]
        self.layout = LAYOUTS.get(self.name)
        self.releases_cache: dict[str, dict[str, list[DistFile]]] = {}

    def releases(self, project: str) -> dict[str, list[DistFile]]:
        if project not in self.releases_cache:
            self.releases_cache[project] = pypi_releases(self.http, self.pypi_url, project)
        return self.releases_cache[project]

    def project_url(self, project: str) -> str:
        return f"{self.pypi_url.rstrip('/')}/pypi/{project}/json"

    def findings(self) -> list[Finding]:
        if self.layout is None:
            return [self._flag(self.name, "no PyPI layout known for this framework; refresh it by hand")]
        package = self.head["package"]
        releases = self.releases(package)
        rows = self.data["release"]
        known = {v for row in rows for v in row["versions"]}
        proposed = set(
            re.findall(rf"^{re.escape(PROPOSAL_MARKER)} {re.escape(self.name)} (\S+)", self.text, re.M)
        )
        oldest = min((_version_key(v) for v in known if _version_key(v) is not None), default=None)
        candidates = []
        for version, files in releases.items():
            key = _version_key(version)
            if key is None or key.is_prerelease or key.is_devrelease or key.local:
                continue
            if version in known or version in proposed or (oldest is not None and key < oldest):
                continue
            if not files or all(f.yanked for f in files):
                continue
            candidates.append((key, version))
        out: list[Finding] = []
        for _, version in sorted(candidates):
            out += self._one(version, rows)
        return out

    def _one(self, version: str, rows: list[dict[str, Any]]) -> list[Finding]:
        subject = f"{self.name} {version}"
        row = self._series_row(version, rows)
        facts = self.facts(version, row or self._template_row(version, rows))
        if row is not None and not facts.problems:
            differences = self._differences(facts, row)
            if not differences:
                anchor = row["versions"][-1]
                detail = (
                    f"add to the row of {', '.join(row['versions'])}: same Python ({', '.join(facts.python)})"
                    f" and the same CUDA pins ({self._describe(facts)})"
                )
                return [
                    self._finding(
                        "add", subject, detail, Edit(kind="append-version", anchor=anchor, text=version)
                    )
                ]
            return [
                self._flag(
                    subject,
                    f"a patch of the row {', '.join(row['versions'])} but PyPI disagrees with it: "
                    + "; ".join(differences)
                    + ". Add a [[release]] row for it by hand.",
                )
            ]
        findings = [self._proposal(version, facts, rows)]
        if facts.problems:
            findings.append(self._flag(subject, "; ".join(facts.problems)))
        return findings

    def _series_row(self, version: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
        series = version.split(".")[: self.layout.series]  # type: ignore[union-attr]
        for row in rows:
            if any(v.split(".")[: len(series)] == series for v in row["versions"]):
                return row
        return None

    def _template_row(self, version: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The newest row released before `version`: which variants to look for."""
        key = _version_key(version)
        older = [r for r in rows if any(_version_key(v) and _version_key(v) < key for v in r["versions"])]
        pool = older or rows
        return max(pool, key=lambda r: max(_version_key(v) for v in r["versions"]))

    def facts(self, version: str, template: dict[str, Any]) -> ReleaseFacts:
        """What PyPI says about `version`, for the PyPI-reachable variants of `template` (its own
        series' row for a patch, else the newest row before it)."""
        package = self.head["package"]
        files = self.releases(package).get(version, [])
        problems: list[str] = []
        python_files = self.releases(self.layout.python_from).get(version, [])  # type: ignore[union-attr]
        python = python_versions(python_files)
        if not python:
            problems.append(f"no CPython Linux x86_64 wheels of {self.layout.python_from} {version} on PyPI")  # type: ignore[union-attr]
        requires_python = next((f.requires_python for f in files if f.requires_python), None)
        wheel = _pick_wheel(files)
        variants: dict[str, dict[str, str]] = {}
        if wheel is None:
            problems.append(f"no Linux x86_64 or pure-Python wheel of {package} {version}")
            return ReleaseFacts(
                python=python, requires_python=requires_python, variants=variants, problems=problems
            )
        metadata = wheel_metadata(self.http, wheel.url)
        requirements = requires_dist(metadata.text)
        for variant in pypi_variants(template):
            facts, plugins = cuda_facts(requirements, variant.get("extra"))
            for plugin, specifier in plugins:
                plugin_version = newest_matching(self.releases(plugin), specifier)
                plugin_wheel = _pick_wheel(self.releases(plugin).get(plugin_version or "", []))
                if plugin_wheel is None:
                    problems.append(f"no Linux x86_64 wheel of {plugin}{specifier} on PyPI")
                    continue
                plugin_requirements = requires_dist(wheel_metadata(self.http, plugin_wheel.url).text)
                extras = re.findall(
                    r"\[([^\]]+)\]", next((r for r in requirements if plugin in r.lower()), "")
                )
                for extra in extras[0].split(",") if extras else [None]:
                    more, _ = cuda_facts(plugin_requirements, extra.strip() if extra else None)
                    facts.update(more)
            if not facts:
                problems.append(f"no CUDA pins for variant {variant['name']} in {wheel.filename}'s METADATA")
                continue
            name = variant["name"]
            if variant.get("extra") is None and "cuda" in facts:
                name = f"cu{facts['cuda'].replace('.', '')}" if name.startswith("cu") else name
            variants[name] = facts
        return ReleaseFacts(
            python=python, requires_python=requires_python, variants=variants, problems=problems
        )

    def _differences(self, facts: ReleaseFacts, row: dict[str, Any]) -> list[str]:
        differences = []
        if facts.python != list(row["python"]):
            differences.append(f"python {', '.join(facts.python)} (row: {', '.join(row['python'])})")
        by_name = {v["name"]: v for v in row["variant"]}
        for name, found in facts.variants.items():
            variant = by_name.get(name)
            if variant is None:
                differences.append(f"PyPI's build is {name} ({self._describe_one(found)}), the row has none")
                continue
            expected = row_facts(variant)
            for key, value in found.items():
                if not same_fact(value, expected.get(key)):
                    differences.append(f"{name} {key} {value} (row: {expected.get(key, 'none')})")
        return differences

    def _describe_one(self, found: dict[str, str]) -> str:
        return ", ".join(f"{k} {v}" for k, v in found.items())

    def _describe(self, facts: ReleaseFacts) -> str:
        return "; ".join(f"{name}: {self._describe_one(found)}" for name, found in facts.variants.items())

    def _proposal(self, version: str, facts: ReleaseFacts, rows: list[dict[str, Any]]) -> Finding:
        template = self._template_row(version, rows)
        by_name = {v["name"]: v for v in template["variant"]}
        page = f"https://pypi.org/project/{self.head['package']}/{version}/"
        lines = ["[[release]]", f"versions = {toml_list([version])}", f"python = {toml_list(facts.python)}"]
        default = next(
            (n for n, v in facts.variants.items() if n not in by_name or not by_name[n].get("extra")), None
        )
        if template.get("pypi_variant") and default:
            lines.append(f"pypi_variant = {toml_string(default)}")
        note = (
            f"Requires-Python {facts.requires_python or 'not stated'}. "
            f"Proposed by envbuild matrix refresh from PyPI METADATA on {self.day}."
        )
        lines += [f"note = {toml_string(note)}", f"source = {toml_string(page)}"]
        for name, found in facts.variants.items():
            like = by_name.get(name) or next(iter(pypi_variants(template)), template["variant"][0])
            index_url = like["index_url"]
            if not like.get("extra") and like["name"] != name:
                index_url = index_url.rsplit("/", 1)[0] + f"/{name}"
            lines += ["", "  [[release.variant]]", f"  name = {toml_string(name)}"]
            lines += [f"  {key} = {toml_string(value)}" for key, value in found.items()]
            lines.append(f"  index_url = {toml_string(index_url)}")
            if like.get("extra"):
                lines.append(f"  extra = {toml_string(like['extra'])}")
            lines += [
                f"  cuda_from = {toml_string(like['cuda_from'])}",
                '  arch = "?"  # unknown: PyPI does not say which GPU archs the wheels were built for',
                f"  source = {toml_string(page)}",
            ]
        header = (
            f"{PROPOSAL_MARKER} {self.name} {version} on {self.day} "
            f"from {self.project_url(self.head['package'])}\n"
            "# Needs a human: fill in each variant's arch (and the download.pytorch.org variants for\n"
            "# torch), check the row against the release notes, then uncomment it and run\n"
            "# `envbuild matrix check`.\n"
        )
        block = header + "\n".join(f"# {line}" if line else "#" for line in lines) + "\n"
        detail = (
            f"new release: Python {', '.join(facts.python) or '?'} (Requires-Python "
            f"{facts.requires_python or 'not stated'}), {self._describe(facts) or 'no CUDA pins read'}; "
            "arch lists unknown, so it is proposed for review"
        )
        return self._finding(
            "review", f"{self.name} {version}", detail, Edit(kind="append-block", anchor="", text=block)
        )

    def _finding(self, action: str, subject: str, detail: str, edit: Edit | None) -> Finding:
        return Finding(
            action=action,
            file=self.rel,
            subject=subject,
            detail=detail,
            source=self.project_url(self.head["package"]),
            fetched=self.day,
            edit=edit,
        )

    def _flag(self, subject: str, detail: str) -> Finding:
        return self._finding("flag", subject, detail, None)
