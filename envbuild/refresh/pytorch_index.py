"""Which CUDA variants each PyTorch release has, from download.pytorch.org's per-CUDA indexes.

Each variant is its own PEP 691 simple index (…/whl/cu128/torch/). The index lists files, not
facts: it shows that torch 2.15.0+cu130 exists, but not its cuDNN, NCCL or arch list, so a variant
the matrix lacks is flagged for a human rather than written.
"""

from __future__ import annotations

import re
from typing import Any

from envbuild.matrix.versions import release_key
from envbuild.refresh.model import Finding
from envbuild.refresh.upstream import Http, simple_index_files

_FILE_RE = re.compile(
    r"^torch-(\d+(?:\.\d+)*)(?:\+([a-z0-9.]+))?-cp\d+-cp\d+t?-(?:manylinux|linux)[^/]*x86_64\.whl$"
)
RECENT_ROWS = 2  # the rows whose variants are checked; older releases do not change upstream


def published_versions(filenames: list[str], variant: str) -> set[str]:
    versions = set()
    for name in filenames:
        match = _FILE_RE.match(name)
        if match and match.group(2) in (variant, None):
            versions.add(match.group(1))
    return versions


def variant_minor(name: str) -> tuple[int, int] | None:
    """ "cu128" -> (12, 8), "cu130" -> (13, 0); None for cpu, rocm and others."""
    match = re.fullmatch(r"cu(\d\d)(\d)", name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def torch_index_findings(
    http: Http,
    index_url: str,
    rel: str,
    data: dict[str, Any],
    cuda_floors: set[tuple[int, int]],
    cuda_minors: set[tuple[int, int]],
    day: str,
) -> list[Finding]:
    """Compare the variants of torch's newest rows with the indexes.

    cuda_floors: CUDA X.Y with a known GA driver floor; cuda_minors: every X.Y drivers.toml names.
    Probed: every variant of the recent rows, and cuXYZ for each CUDA minor newer than all of them,
    which is how a brand-new variant shows up."""
    rows = sorted(data["release"], key=lambda r: release_key(r["versions"][-1]), reverse=True)[:RECENT_ROWS]
    known: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for variant in row["variant"]:
            if "download.pytorch.org" in variant["index_url"] or variant["index_url"].startswith(index_url):
                known.setdefault(variant["index_url"].rstrip("/").rsplit("/", 1)[-1], []).append(row)
    newest = max((m for m in map(variant_minor, known) if m), default=(0, 0))
    probes = sorted(known) + [f"cu{m[0]}{m[1]}" for m in sorted(cuda_minors) if m > newest]
    versions = [v for row in rows for v in row["versions"]]
    findings: list[Finding] = []
    for name in probes:
        listing = simple_index_files(http, f"{index_url.rstrip('/')}/{name}", "torch")
        url = f"{index_url.rstrip('/')}/{name}/torch/"
        if listing is None:
            if name in known:
                findings.append(
                    Finding(
                        action="flag",
                        file=rel,
                        subject=f"torch {name}",
                        detail=f"the matrix installs from {url} but it answered 404",
                        source=url,
                        fetched=day,
                        edit=None,
                    )
                )
            continue
        published = published_versions([f.filename for f in listing], name)
        rows_with = {id(r) for r in known.get(name, [])}
        missing = [v for row in rows if id(row) in rows_with for v in row["versions"] if v not in published]
        if missing:
            findings.append(
                Finding(
                    action="flag",
                    file=rel,
                    subject=f"torch {name}",
                    detail=f"the matrix lists {name} builds of {', '.join(missing)}, "
                    f"but {url} has no such wheel",
                    source=url,
                    fetched=day,
                    edit=None,
                )
            )
        extra = [
            v for v in versions if v in published and not any(v in r["versions"] for r in known.get(name, []))
        ]
        if not extra:
            continue
        minor = variant_minor(name)
        if minor is not None and minor not in cuda_floors:
            why = (
                f"new CUDA variant {name}: torch {', '.join(extra)} is published for it, but "
                f"drivers.toml has no driver floor for CUDA {minor[0]}.{minor[1]}. Add its [[cuda]] row "
                "from Table 3 of the CUDA release notes first; no row is proposed until then"
            )
        else:
            why = (
                f"torch {', '.join(extra)} is published for {name}, which the matrix does not list; "
                "its cuDNN, NCCL and arch list are not on the index, so add the [[release.variant]] by hand"
            )
        findings.append(
            Finding(
                action="flag",
                file=rel,
                subject=f"torch {name}",
                detail=why,
                source=url,
                fetched=day,
                edit=None,
            )
        )
    return findings
