"""`envbuild matrix refresh`: read upstream, propose matrix rows, flag what a human must decide.

Sources (each can be chosen with --source):
  pypi              new framework releases, their Python wheels, Requires-Python and CUDA pins
  pytorch-index     the CUDA variants each recent torch release has on download.pytorch.org
  nvidia-cuda-tags  nvidia/cuda tags: deleted tag sets and new releases
With --audit, the arch list of each PyPI-hosted framework row is checked against the kernels in its
wheels (refresh/arch_audit.py); --audit alone runs only that. With --requirements, the CUDA-family
requirements of every build's install wheel are measured into matrix/requirements.toml
(refresh/requirements.py); --requirements alone runs only that.

Nothing upstream is trusted to fill a fact it does not state: see refresh/model.py for the three kinds
of finding. Base URLs are settings (flags or ENVBUILD_* variables) so mirrors, and the tests'
recorded answers on 127.0.0.1, go through the same code.
"""

from __future__ import annotations

import os

from envbuild._util.record import Record
from envbuild._util.resources import inside_installed_package
from envbuild.errors import UsageError
from envbuild.matrix.load import build_matrix, default_matrix_dir, read_raw
from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import list_tags
from envbuild.refresh.arch_audit import ArchAudit
from envbuild.refresh.cuda_images import image_findings
from envbuild.refresh.edit import edited_texts, write_checked
from envbuild.refresh.model import ACTIONS, Finding
from envbuild.refresh.pypi import FrameworkRefresh
from envbuild.refresh.pytorch_index import torch_index_findings
from envbuild.refresh.requirements import RequirementsRefresh
from envbuild.refresh.requirements import findings as requirements_findings
from envbuild.refresh.upstream import Http

SOURCES = ("pypi", "pytorch-index", "nvidia-cuda-tags")
DEFAULT_PYPI = "https://pypi.org"
DEFAULT_PYTORCH_INDEX = "https://download.pytorch.org/whl"
DEFAULT_CUDA_REPOSITORY = "docker.io/nvidia/cuda"


class Settings(Record):
    __slots__ = (
        "sources",
        "pypi_url",
        "pytorch_index_url",
        "cuda_repository",
        "timeout",
        "retries",
        "audit",
        "requirements",
    )
    sources: tuple[str, ...]
    pypi_url: str
    pytorch_index_url: str
    cuda_repository: str
    timeout: float
    retries: int
    audit: tuple[str, ...]  # frameworks whose arch lists --audit checks against their wheels
    requirements: bool  # --requirements: measure matrix/requirements.toml from the install wheels


def parse_audit(
    text: str | None, frameworks: tuple[str, ...] = ("jax", "tensorflow", "torch")
) -> tuple[str, ...]:
    """--audit (every framework) or --audit jax,tensorflow; None: no audit."""
    if text is None:
        return ()
    if text == "all":
        return frameworks
    chosen = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in frameworks]
    if unknown or not chosen:
        raise UsageError(
            f"--audit {text!r}: unknown framework {', '.join(unknown) or '(none)'}",
            fix=f"use --audit alone, or a comma-separated list of {', '.join(frameworks)}",
        )
    return chosen


def parse_sources(text: str | None) -> tuple[str, ...]:
    if not text:
        return SOURCES
    chosen = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in SOURCES]
    if unknown or not chosen:
        raise UsageError(
            f"--source {text!r}: unknown source {', '.join(unknown) or '(none)'}",
            fix=f"use a comma-separated list of {', '.join(SOURCES)}",
        )
    return chosen


def settings_from(
    sources: str | None,
    pypi_url: str | None,
    pytorch_index_url: str | None,
    cuda_repository: str | None,
    timeout: float = 30,
    retries: int = 2,
    audit: str | None = None,
    requirements: bool = False,
) -> Settings:
    """Flags first, then ENVBUILD_PYPI_URL / ENVBUILD_PYTORCH_INDEX_URL / ENVBUILD_CUDA_REPOSITORY.
    With `audit` or `requirements` and no `sources`, only those run."""
    pypi = pypi_url or os.environ.get("ENVBUILD_PYPI_URL") or DEFAULT_PYPI
    index = pytorch_index_url or os.environ.get("ENVBUILD_PYTORCH_INDEX_URL") or DEFAULT_PYTORCH_INDEX
    repository = cuda_repository or os.environ.get("ENVBUILD_CUDA_REPOSITORY") or DEFAULT_CUDA_REPOSITORY
    for flag, url in (("--pypi-url", pypi), ("--pytorch-index-url", index)):
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"{flag} {url!r} is not an http(s) URL", fix=f"e.g. {flag} https://pypi.org")

    parse_reference(repository)  # a malformed repository is a usage error naming the value
    if timeout <= 0:
        raise UsageError(f"--timeout {timeout} must be positive", fix="e.g. --timeout 30")
    audited = parse_audit(audit)
    return Settings(
        sources=() if (audited or requirements) and not sources else parse_sources(sources),
        pypi_url=pypi.rstrip("/"),
        pytorch_index_url=index.rstrip("/"),
        cuda_repository=repository,
        timeout=timeout,
        retries=retries,
        audit=audited,
        requirements=requirements,
    )


def refresh(root: str, settings: Settings, day: str) -> list[Finding]:
    """Every finding of the chosen sources against the matrix in `root`, in file order."""

    digest, raw = read_raw(root)
    matrix = build_matrix(root, digest, raw)
    http = Http(timeout=settings.timeout, retries=settings.retries)
    findings: list[Finding] = []
    if "pypi" in settings.sources:
        for rel, entry in raw.items():
            if entry["kind"] == "framework":
                with open(os.path.join(root, rel), encoding="utf-8") as handle:
                    text = handle.read()
                findings += FrameworkRefresh(
                    http, settings.pypi_url, rel, entry["data"], text, day
                ).findings()
    if settings.audit:
        for rel, entry in raw.items():
            if entry["kind"] == "framework" and entry["data"]["framework"]["name"] in settings.audit:
                findings += ArchAudit(http, settings.pypi_url, rel, entry["data"], day).findings()
    if settings.requirements:
        frameworks = [e["data"] for e in raw.values() if e["kind"] == "framework"]
        measuring = RequirementsRefresh(http, settings.pypi_url)
        builds, unread = measuring.measure(frameworks)
        findings += requirements_findings(root, builds, unread, settings.pypi_url, day, measuring.partly)
    if "pytorch-index" in settings.sources:
        torch = next(
            (
                (rel, e)
                for rel, e in raw.items()
                if e["kind"] == "framework" and e["data"]["framework"]["name"] == "torch"
            ),
            None,
        )
        if torch is not None:
            floors = {m for m, row in matrix.ga_floor.items() if row.min_driver}
            minors = {c.version[:2] for c in matrix.cuda}
            if minors:
                top = max(minors)
                minors |= {(top[0], top[1] + 1), (top[0], top[1] + 2), (top[0] + 1, 0)}
            findings += torch_index_findings(
                http, settings.pytorch_index_url, torch[0], torch[1]["data"], floors, minors, day
            )
    if "nvidia-cuda-tags" in settings.sources:
        parsed = parse_reference(settings.cuda_repository)
        tags_url, tags = list_tags(
            settings.cuda_repository, timeout=settings.timeout, retries=settings.retries
        )
        known = {c.version for c in matrix.cuda if c.min_driver}
        rel = next(rel for rel, e in raw.items() if e["kind"] == "cuda")
        findings += image_findings(rel, raw[rel]["data"], tags, tags_url, parsed.repository, known, day)
    order = {rel: i for i, rel in enumerate(raw)}
    return sorted(findings, key=lambda f: (order.get(f.file, len(order)), ACTIONS.index(f.action)))


def refresh_matrix(
    root: str | None, settings: Settings, day: str, *, write: bool
) -> tuple[list[Finding], bool]:
    """`envbuild matrix refresh` of the matrix in `root` (default: the bundled one): the findings, and
    whether --write changed the files (it writes only when every edited file passes `matrix check`)."""
    root = root or default_matrix_dir()
    if write and inside_installed_package(root):
        raise UsageError(
            f"--write would edit the matrix inside the installed package ({root})",
            fix="run it in a checkout, or pass --matrix DIR (a copy of matrix/ you commit)",
        )
    findings = refresh(root, settings, day)
    if not write:
        return findings, False
    texts = {rel: text for rel, text in edited_texts(root, findings).items() if not _same(root, rel, text)}
    if texts:
        write_checked(root, texts)
    return findings, bool(texts)


def _same(root: str, rel: str, text: str) -> bool:
    """Whether the file already holds `text`: a re-run that changes nothing writes nothing."""
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as handle:
            return handle.read() == text
    except FileNotFoundError:
        return False


_SYMBOL = {"add": "+", "review": "?", "flag": "!"}


def to_text(findings: list[Finding], *, day: str, sources: tuple[str, ...], written: bool) -> str:
    lines = [f"envbuild matrix refresh: {', '.join(sources) or 'wheel kernels (--audit)'} read on {day}"]
    if not findings:
        lines.append("the matrix agrees with upstream: nothing to propose")
        return "\n".join(lines) + "\n"
    current = None
    for finding in findings:
        if finding.file != current:
            current = finding.file
            lines += ["", f"matrix/{finding.file}"]
        lines.append(f"  {_SYMBOL[finding.action]} {finding.subject}: {finding.detail}")
        lines.append(f"      source: {finding.source} (fetched {finding.fetched})")
        if finding.edit is not None and finding.action == "add" and finding.edit.kind == "append-block":
            lines += [f"      | {line}" for line in finding.edit.text.rstrip("\n").split("\n")]
    counts = {a: sum(f.action == a for f in findings) for a in ACTIONS}
    lines.append("")
    lines.append(
        f"{counts['add']} to add, {counts['review']} for review, {counts['flag']} flagged "
        "(+ written by --write; ? written commented out for a human to finish; ! report only)"
    )
    if written:
        lines.append("wrote the + and ? findings; `envbuild matrix check` passes on the result")
    elif counts["add"] or counts["review"]:
        lines.append("nothing written: run again with --write to apply the + and ? findings")
    return "\n".join(lines) + "\n"


def to_json(findings: list[Finding], *, day: str, sources: tuple[str, ...], written: bool) -> str:
    import json

    return json.dumps(
        {
            "fetched": day,
            "sources": list(sources),
            "written": written,
            "findings": [f.to_json() for f in findings],
        },
        indent=2,
    )
