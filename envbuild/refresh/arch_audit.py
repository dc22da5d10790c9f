"""`envbuild matrix refresh --audit`: each PyPI-hosted framework row's arch list against its wheels.

For every release of a row, the Linux x86_64 wheel that carries the framework's kernels (the JAX
CUDA plugin, tensorflow, torch) is found on PyPI, and for a row published for linux/arm64 its Linux
aarch64 wheel too (PyTorch builds those for fewer GPUs, so their list is the row's `arch_by_platform`
entry, with the audited wheel as its source), only its kernel libraries (envbuild.audit.libraries)
are read by range requests, and cuobjdump lists their SASS and PTX. When every release of the row
agrees, the row is confirmed (its `confidence` goes, `arch_source` names the newest wheel by URL and
sha256) or corrected to the measured list; when releases disagree the row needs splitting, which is
a human's call, so it is flagged. Rows hosted off PyPI (download.pytorch.org, JAX's find-links
page) are counted and left as they are.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import tempfile
from collections import Counter
from typing import Any

from envbuild._util.record import Record
from envbuild.audit.kernels import cuobjdump_binary, read_kernels
from envbuild.audit.libraries import FRAMEWORK_LIBRARIES
from envbuild.errors import EnvbuildError
from envbuild.refresh.kernel_facts import Comparison, Measured, compare, measure
from envbuild.refresh.members import read_members
from envbuild.refresh.model import Edit, Finding, toml_string
from envbuild.refresh.pypi import _pick_wheel
from envbuild.refresh.upstream import DistFile, Http, pypi_releases

PYPI_INDEX = "https://pypi.org/simple"
DEFAULT_PLATFORM = "linux/amd64"  # the platform `arch` is measured on (the x86_64 wheel)
_AARCH64_RE = re.compile(r"-cp(\d)(\d+)-cp\d+-(?:manylinux|linux)[^/]*aarch64\.whl$")
_ENTRY_ARCH_RE = re.compile(r"^(?:ELF|PTX) file\s+\d+:.*\.sm_(\d+[af]?)\.(?:cubin|ptx)$")


class WheelKernels(Record):
    __slots__ = ("version", "wheel", "measured", "libraries", "bytes_read")
    version: str
    wheel: DistFile
    measured: Measured
    libraries: tuple[str, ...]  # the members with device code
    bytes_read: int


def kernel_package(framework: str, package: str, row: dict[str, Any], variant: dict[str, Any]) -> str | None:
    """The PyPI project whose wheel holds the variant's kernels, or None when the variant is not
    installed from PyPI (its arch list cannot be read here). A variant hosted on its own index that
    the row names as `pypi_variant` is the very build PyPI serves (torch's default CUDA build)."""
    if row.get("pypi_variant") == variant["name"]:
        return package
    if not variant["index_url"].startswith(PYPI_INDEX):
        return None
    if framework == "jax":
        match = re.fullmatch(r"cuda(\d+)", variant.get("extra") or "")
        return f"jax-cuda{match.group(1)}-plugin" if match else None
    return package


def entry_counts(path: str, binary: str) -> Counter[str]:
    """How many fatbin entries the library has per architecture ("sm_90": 274, "compute_90": 273):
    read_kernels gives the sets; the counts tell a build's arch list from a few special kernels."""
    counts: Counter[str] = Counter()
    for flag, prefix in (("--list-elf", "sm_"), ("--list-ptx", "compute_")):
        done = subprocess.run(
            [binary, flag, path], capture_output=True, text=True, errors="replace", check=False
        )
        for line in done.stdout.splitlines():
            match = _ENTRY_ARCH_RE.search(line.strip())
            if match:
                counts[prefix + match.group(1)] += 1
    return counts


def pick_aarch64_wheel(files: list[DistFile]) -> DistFile | None:
    """The release's Linux aarch64 CPython wheel: cp311 if there is one, else the newest CPython (as
    the x86_64 pick); free-threaded (cp313t) builds are left out by the ABI tag."""
    found = [f for f in files if not f.yanked and _AARCH64_RE.search(f.filename)]
    for f in found:
        if "-cp311-cp311-" in f.filename:
            return f
    if not found:
        return None
    return max(found, key=lambda f: [int(x) for x in _AARCH64_RE.search(f.filename).groups()])  # type: ignore[union-attr]


def variant_platforms(data: dict[str, Any], row: dict[str, Any], variant: dict[str, Any]) -> list[str]:
    """The platforms a variant is published for: the nearest level that says (as the loader reads it)."""
    return list(variant.get("platforms") or row.get("platforms") or data["framework"].get("platforms") or ())


def inline_table(entries: dict[str, str]) -> str:
    """`{ "linux/arm64" = "8.0;9.0" }`: the file's style for a per-platform value, on one line."""
    return "{ " + ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in sorted(entries.items())) + " }"


def kernel_member(framework: str, name: str) -> bool:
    """Whether the wheel member `name` is a library `framework` loads its kernels from."""
    return ".so" in os.path.basename(name) and any(
        fnmatch.fnmatch(name, pattern) for pattern in FRAMEWORK_LIBRARIES.get(framework, ())
    )


class ArchAudit:
    """Audits the arch lists of one frameworks/<name>.toml against its PyPI wheels."""

    def __init__(self, http: Http, pypi_url: str, rel: str, data: dict[str, Any], day: str) -> None:
        self.http, self.pypi_url, self.rel, self.data, self.day = http, pypi_url, rel, data, day
        self.name = data["framework"]["name"]
        self.package = data["framework"]["package"]
        self.releases_cache: dict[str, dict[str, list[DistFile]]] = {}
        self.binary = cuobjdump_binary()

    def releases(self, project: str) -> dict[str, list[DistFile]]:
        if project not in self.releases_cache:
            self.releases_cache[project] = pypi_releases(self.http, self.pypi_url, project)
        return self.releases_cache[project]

    def findings(self) -> list[Finding]:
        findings: list[Finding] = []
        off_pypi: list[str] = []
        for row in self.data["release"]:
            for variant in row["variant"]:
                subject = f"{self.name} {row['versions'][0]} {variant['name']}"
                project = kernel_package(self.name, self.package, row, variant)
                if project is None:
                    off_pypi.append(subject)
                    continue
                findings += self._row(row, variant, project, subject)
                if "linux/arm64" in variant_platforms(self.data, row, variant):
                    findings += self._row(row, variant, project, f"{subject} (linux/arm64)", "linux/arm64")
        if off_pypi:
            findings.append(
                self._finding(
                    "flag",
                    f"{self.name} arch lists off PyPI",
                    f"{len(off_pypi)} variant(s) not audited, their wheels are not on PyPI: "
                    + ", ".join(off_pypi),
                    self.pypi_url,
                    None,
                )
            )
        return findings

    def wheel_kernels(
        self, project: str, version: str, platform: str = DEFAULT_PLATFORM
    ) -> WheelKernels | str:
        """The measured kernels of `project` `version`'s wheel for `platform`, or why there are none."""
        files = self.releases(project).get(version, [])
        wheel = _pick_wheel(files) if platform == DEFAULT_PLATFORM else pick_aarch64_wheel(files)
        machine = "x86_64" if platform == DEFAULT_PLATFORM else "aarch64"
        if wheel is None or wheel.filename.endswith("-none-any.whl"):
            return f"no Linux {machine} wheel of {project} {version} on PyPI"
        with tempfile.TemporaryDirectory(prefix="envbuild-refresh-audit-") as scratch:
            read = read_members(self.http, wheel.url, lambda n: kernel_member(self.name, n), scratch)
            counts: dict[str, Counter[str]] = {}
            for path in read.paths:
                try:
                    found = read_kernels(os.path.join(scratch, path), self.binary)
                except EnvbuildError as exc:
                    return f"{wheel.filename}: {path}: {exc.message}"
                if found.unread is not None:  # e.g. cuobjdump 13 stops at sm_35 entries: this row only,
                    return f"{wheel.filename}: {path}: {found.unread}"  # a partial arch list is no fact
                if found.has_device_code:
                    counts[path] = entry_counts(os.path.join(scratch, path), self.binary)
        if not counts:
            return f"{wheel.filename} has no kernel library with device code"
        return WheelKernels(
            version=version,
            wheel=wheel,
            measured=measure(counts),
            libraries=tuple(counts),
            bytes_read=read.bytes_read,
        )

    def _row(
        self,
        row: dict[str, Any],
        variant: dict[str, Any],
        project: str,
        subject: str,
        platform: str = DEFAULT_PLATFORM,
    ) -> list[Finding]:
        audited: list[WheelKernels] = []
        missing: list[str] = []
        for version in row["versions"]:
            result = self.wheel_kernels(project, version, platform)
            (missing if isinstance(result, str) else audited).append(result)  # type: ignore[arg-type]
        if not audited:
            if platform != DEFAULT_PLATFORM:  # PyTorch's aarch64 PyPI wheel is CPU-only up to 2.10
                return []
            return [self._finding("flag", subject, "; ".join(missing), self.pypi_url, None)]
        said = self._said(variant, platform)
        groups: dict[tuple[frozenset, frozenset], list[WheelKernels]] = {}
        for one in audited:  # the arch list decides; the counts of special kernels may vary by release
            groups.setdefault((one.measured.sass, one.measured.ptx), []).append(one)
        if len(groups) > 1:
            parts = [
                f"{', '.join(w.version for w in group)}: " + compare(said, group[0].measured).proposed
                for group in groups.values()
            ]
            detail = (
                "the releases of the row carry different kernels, so the row needs splitting: "
                + "; ".join(parts)
            )
            return [self._finding("flag", subject, detail, audited[-1].wheel.url, None)]
        newest = audited[-1]
        comparison = compare(said, newest.measured)
        if newest.wheel.sha256 is None:
            detail = f"{newest.wheel.filename}: the index gives no sha256 to name the wheel by"
            return [self._finding("flag", subject, detail, newest.wheel.url, None)]
        arch_source = f"{newest.wheel.url}#sha256={newest.wheel.sha256}"
        if platform != DEFAULT_PLATFORM:
            finding = self._platform_correction(variant, subject, audited, comparison, arch_source, platform)
            findings = [finding] if finding is not None else []
        else:
            same_wheel = str(variant.get("arch_source", "")).endswith(f"#sha256={newest.wheel.sha256}")
            if comparison.confirmed and same_wheel and "confidence" not in variant:
                return []  # measured before from this very wheel (a mirror may name it by another URL)
            findings = [self._correction(variant, subject, audited, comparison, arch_source)]
        if missing and findings:
            findings.append(self._finding("flag", subject, "; ".join(missing), self.pypi_url, None))
        return findings

    @staticmethod
    def _said(variant: dict[str, Any], platform: str) -> str:
        """The list the row gives `platform`: its own entry, else `arch`."""
        own = variant.get("arch_by_platform") or {}
        return str(own.get(platform, variant["arch"]))

    def _platform_correction(
        self,
        variant: dict[str, Any],
        subject: str,
        audited: list[WheelKernels],
        comparison: Comparison,
        wheel: str,
        platform: str,
    ) -> Finding | None:
        """The row's `arch_by_platform` entry for `platform` set to what its wheel carries, with the
        wheel as the entry's source; None when the row already says so from this very wheel. A wheel
        whose kernels are exactly `arch` needs no entry, and one the row has is dropped."""
        lists = dict(variant.get("arch_by_platform") or {})
        sources = dict(variant.get("arch_by_platform_source") or {})
        sha = wheel.rsplit("#sha256=", 1)[1]
        if comparison.confirmed and str(sources.get(platform, "")).endswith(f"#sha256={sha}"):
            return None
        newest = audited[-1]
        versions = ", ".join(w.version for w in audited)
        same_as_arch = compare(variant["arch"], newest.measured).confirmed
        if same_as_arch:
            if platform not in lists:
                return None  # the wheel carries `arch` itself: nothing the row should say differently
            lists.pop(platform)
            sources.pop(platform, None)
            detail = f"{platform}: the {versions} wheel carries arch {variant['arch']} itself; the entry goes"
        else:
            proposed = comparison.proposed
            lists[platform] = proposed
            sources[platform] = wheel
            detail = f"{platform} arch {self._said(variant, platform)} -> {proposed} (read from {versions})"
            if comparison.differences:
                detail += ": " + "; ".join(comparison.differences)
            if newest.measured.extra:
                detail += f"; outside the build's list: {'; '.join(newest.measured.extra)}"
        changes = []
        for key, entries in (("arch_by_platform", lists), ("arch_by_platform_source", sources)):
            changes.append(f"{key} = {inline_table(entries)}" if entries else f"-{key}")
        anchor = f"{self._first_version(variant)} {variant['name']}"
        return self._finding(
            "add", subject, detail, wheel, Edit(kind="set-variant", anchor=anchor, text="\n".join(changes))
        )

    def _correction(
        self,
        variant: dict[str, Any],
        subject: str,
        audited: list[WheelKernels],
        comparison: Comparison,
        arch_source: str,
    ) -> Finding:
        newest = audited[-1]
        versions = ", ".join(w.version for w in audited)
        libraries = ", ".join(os.path.basename(path) for path in newest.libraries)
        core = "the most entries" if len(newest.libraries) > 1 else "its entries"
        said = "" if comparison.confirmed else f"; the row said {variant['arch']}"
        note = (
            f"Arch list measured by `envbuild matrix refresh --audit` on {self.day}: the SASS and PTX "
            f"in most fatbin entries of the kernel library with {core} among {libraries} in "
            f"{newest.wheel.filename} (releases read: {versions}){said}."
        )
        if newest.measured.extra:
            note += f" Outside the build's list: {'; '.join(newest.measured.extra)}."
        if newest.measured.specific:
            note += f" Also arch-specific SASS {', '.join(newest.measured.specific)} (that exact GPU only)."
        if variant.get("note"):
            note += f" Earlier note: {variant['note']}"
        changes = []
        if not comparison.confirmed:
            changes.append(f"arch = {toml_string(comparison.proposed)}")
        changes += [f"arch_source = {toml_string(arch_source)}", "-confidence", f"note = {toml_string(note)}"]
        if comparison.confirmed:
            detail = f"arch {variant['arch']} confirmed by the kernels of {versions}"
            if "confidence" in variant:
                detail += f"; confidence {variant['confidence']!r} can go"
        else:
            detail = f"arch {variant['arch']} -> {comparison.proposed} (read from {versions}): " + "; ".join(
                comparison.differences
            )
        anchor = f"{self._first_version(variant)} {variant['name']}"
        return self._finding(
            "add",
            subject,
            detail,
            arch_source,
            Edit(kind="set-variant", anchor=anchor, text="\n".join(changes)),
        )

    def _first_version(self, variant: dict[str, Any]) -> str:
        row = next(r for r in self.data["release"] if any(v is variant for v in r["variant"]))
        return row["versions"][0]

    def _finding(self, action: str, subject: str, detail: str, source: str, edit: Edit | None) -> Finding:
        return Finding(
            action=action,
            file=self.rel,
            subject=subject,
            detail=detail,
            source=source,
            fetched=self.day,
            edit=edit,
        )
