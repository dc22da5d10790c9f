"""Text and JSON views of a Resolution: the table, the grouped rejections, the caveats, the hints."""

from __future__ import annotations

import json

from envbuild._util.record import TYPE_CHECKING
from envbuild.matrix.model import Matrix
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.versions import Driver, format_driver, format_minor
from envbuild.resolve.pins import stack_pins
from envbuild.resolve.solver import (
    COMPAT_CAVEAT,
    FAILURE_ORDER,
    MINOR_COMPAT_COST,
    Rejection,
    Resolution,
    Stack,
    candidate_label,
    native_cuda_of,
    native_cuda_without_floor,
)

if TYPE_CHECKING:
    from typing import Any

GROUP_TITLES = {
    "framework": "excluded by --framework",
    "platform": "not published for the platform",
    "python": "no wheels for the requested Python",
    "cuda": "CUDA does not match --cuda",
    "strategy": "does not fit the CUDA strategy",
    "driver": 'driver too old ("CUDA driver version is insufficient")',
    "gpu": 'GPU not covered ("no kernel image is available for execution on the device")',
}
SHOWN_PER_GROUP = 6


def stack_json(stack: Stack, strategy: str | None = None) -> dict[str, Any]:
    """strategy: the install the pins are for (None: resolve's wheels install line)."""
    variant = stack.variant
    return {
        "framework": stack.framework.name,
        "framework_version": stack.release.version,
        "variant": variant.name,
        "cuda": format_minor(stack.cuda),
        "cudnn": variant.cudnn,
        "cudnn_pin": format_minor(stack.cudnn_pin) if stack.cudnn_pin else None,
        "nccl": variant.nccl,
        "python": format_minor(stack.python),
        "min_driver": format_driver(stack.min_driver),
        "index_url": variant.index_url,
        "pins": list(stack_pins(stack, strategy)),
        "install": install_hint(stack, strategy),
        "compat": stack.mode,
        "cuda_from": variant.cuda_from,
        "extra": variant.extra,
        "pypi_default": stack.release.pypi_variant == variant.name,
        # the kernels of the build for the stack's own platform (an arm64 wheel carries fewer), which the
        # lock, the image's label and the SBOM repeat
        "arch": variant.arch_for(stack.platform).describe(),
        "arch_source": variant.arch_source_for(stack.platform),  # the wheel it was measured from, or None
        # tool wheels pinned to their own bound above `cuda` (JAX's ptxas), and the wheel whose METADATA
        # the pins and the base-image check were held to (None: not measured)
        "toolchain": dict(stack.toolchain),
        "requirements_source": stack.needs.source if stack.needs else None,
        "caveats": list(stack.caveats),
    }


def rejection_json(rejection: Rejection) -> dict[str, Any]:
    return {
        "candidate": candidate_label(rejection.framework, rejection.release, rejection.variant),
        "reason": rejection.reason.text,
        "kind": rejection.reason.kind,
        "all_reasons": [f.text for f in rejection.failures],
    }


def closest_json(rejection: Rejection) -> dict[str, Any]:
    data = rejection_json(rejection)
    data["relax"] = [f.relax for f in rejection.failures if f.relax]
    return data


def minor_compat_json(resolution: Resolution) -> dict[str, Any]:
    """Per framework, what --compat minor would give instead of the native answer, and its cost."""
    native = {}
    for stack in resolution.stacks:
        native.setdefault(stack.framework.name, stack)
    document = {}
    for name, stack in resolution.with_minor_compat.items():
        instead = native[name]
        document[name] = {
            "candidate": _label(stack),
            "framework_version": stack.release.version,
            "variant": stack.variant.name,
            "cuda": format_minor(stack.cuda),
            "min_driver": format_driver(stack.min_driver),
            "instead_of": _label(instead),
            "caveat": COMPAT_CAVEAT.format(cuda=format_minor(stack.cuda), driver=resolution.query.driver),
        }
    return document


def _label(stack: Stack) -> str:
    return candidate_label(stack.framework, stack.release, stack.variant)


def _native_claim(matrix: Matrix, driver: Driver) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """(the newest CUDA the driver runs natively, the part of that without a known minimum driver).

    The first is the branch row's CUDA where drivers.toml backs it (R620: 13.5), so the header agrees
    with the branch row; the second says which of those releases no stack is resolved against."""
    unfloored = native_cuda_without_floor(matrix, driver)
    return (unfloored[-1] if unfloored else native_cuda_of(matrix, driver)), unfloored


def to_json(resolution: Resolution, matrix: Matrix) -> str:
    return json.dumps(resolution_json(resolution, matrix), indent=2)


def resolution_json(resolution: Resolution, matrix: Matrix) -> dict[str, Any]:
    """The --json document of one resolution, as a dict (`resolve -f` puts one per target in a list)."""
    native, unfloored = _native_claim(matrix, resolution.query.driver)
    document = {
        "driver": str(resolution.query.driver),
        "native_cuda": format_minor(native) if native else None,
        "native_cuda_without_floor": [format_minor(m) for m in unfloored],
        "compat": resolution.query.compat,
        "platform": resolution.query.platform,
        "branch": _branch_json(matrix, resolution.query.driver.branch),
        "matrix_digest": matrix.digest,
        "stacks": [stack_json(s, resolution.query.strategy) for s in resolution.stacks],
        "rejected": [rejection_json(r) for r in resolution.rejected],
        "problems": list(resolution.problems),
        "notes": list(resolution.query.notes),
        "closest": [closest_json(r) for r in resolution.closest],
        "with_minor_compat": minor_compat_json(resolution),
    }
    return document


def _branch_json(matrix: Matrix, branch: int) -> dict[str, Any] | None:
    row = matrix.branches.get(branch)
    if row is None:
        return None
    return {
        "branch": branch,
        "type": row.type,
        "eol": row.eol,
        "native_cuda": format_minor(row.native_cuda),
        "confidence": row.prov.confidence,
    }


def install_hint(stack: Stack, strategy: str | None = None) -> str:
    """The pip command for the stack, with the same nvidia-* pins render writes to constraints.txt."""
    variant = stack.variant
    name = stack.framework.package
    requirement = (
        f"{name}[{variant.extra}]=={stack.release.version}"
        if variant.extra
        else (f"{name}=={stack.release.version}")
    )
    requirements = " ".join(f"'{r}'" for r in (requirement, *stack_pins(stack, strategy)))
    # the release's PyPI build installs from PyPI, as render installs it: PyPI is where its arm64
    # wheels are cited from (torch 2.11+), and a plain `pip install` is what its users type
    if variant.index_url.startswith("https://pypi.org/") or stack.release.pypi_variant == variant.name:
        return f"pip install {requirements}"
    if "storage.googleapis.com" in variant.index_url:
        return f"pip install {requirements} -f {variant.index_url}"
    return f"pip install {requirements} --index-url {variant.index_url}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def to_text(resolution: Resolution, matrix: Matrix, *, verbose: bool = False) -> str:
    query = resolution.query
    native, unfloored = _native_claim(matrix, query.driver)
    lines = []
    runs = f"runs CUDA <= {format_minor(native)} natively" if native else "runs no CUDA 11+"
    judged = native_cuda_of(matrix, query.driver)
    if unfloored and judged:
        runs += (
            f"; stacks are resolved for CUDA <= {format_minor(judged)}, the newest with a confirmed "
            f"minimum driver (none recorded for {', '.join(format_minor(m) for m in unfloored)})"
        )
    header = f"driver {query.driver}{_branch_note(matrix, query.driver)} {runs}"
    if query.compat == "minor":
        majors = sorted(m for m, row in matrix.minor_compat.items() if query.driver.at_least(row.min_driver))
        if majors:
            header += f"; with --compat minor, any CUDA {'/'.join(f'{m}.x' for m in majors)}"
    if query.platform != DEFAULT_PLATFORM:  # amd64 outputs keep their bytes, as amd64 locks do
        header += f"; platform {query.platform}"
    if query.gpus:
        header += "; GPUs: " + ", ".join(
            f"{g.name} ({g.cc[0]}.{g.cc[1]})" if g.architecture else g.name for g in query.gpus
        )
    lines.append(header)
    lines.append("")

    for note in query.notes:
        lines.append(f"note: {note}")
    for problem in resolution.problems:
        lines.append(f"problem: {problem}")
    if resolution.stacks:
        rows = [
            [
                "#",
                "framework",
                "variant",
                "CUDA",
                "cuDNN",
                "NCCL",
                "Python",
                "min driver",
                "compat",
                "platform",
            ]
        ]
        for i, stack in enumerate(resolution.stacks, 1):
            rows.append(
                [
                    str(i),
                    f"{stack.framework.name} {stack.release.version}",
                    stack.variant.name,
                    format_minor(stack.cuda),
                    f"{format_minor(stack.cudnn_pin)}.*" if stack.cudnn_pin else stack.variant.cudnn or "-",
                    stack.variant.nccl or "-",
                    format_minor(stack.python),
                    format_driver(stack.min_driver),
                    stack.mode,
                    query.platform,
                ]
            )
        lines.append("Compatible stacks (best first: newest release, then CUDA, then Python):")
        lines += _table(rows)
        for name, count in resolution.more.items():
            lines.append(
                f"  ... {count} more {name} stack{'s' * (count != 1)} (--framework {name} --limit N)"
            )
        lines.append("")
        lines.append("Install:")
        for i, stack in enumerate(resolution.stacks, 1):
            lines.append(f"  {i}. {install_hint(stack, query.strategy)}")
        native_best = {}
        for stack in resolution.stacks:
            native_best.setdefault(stack.framework.name, stack)
        if resolution.with_minor_compat:
            lines.append("")
        for name, newer in resolution.with_minor_compat.items():
            lines.append(
                f"With --compat minor: {_label(newer)} (CUDA {format_minor(newer.cuda)}) instead of "
                f"{_label(native_best[name])}; {MINOR_COMPAT_COST}"
            )
        if any(s.caveats for s in resolution.stacks):
            # numbered by the stack they belong to (the table's #), each stack's listed under it
            lines.append("")
            lines.append("Caveats:")
            for i, stack in enumerate(resolution.stacks, 1):
                if stack.caveats:
                    lines.append(f"  {i}. {_label(stack)}:")
                    lines += [f"     - {c}" for c in stack.caveats]
    elif not resolution.problems:
        lines.append("No compatible stack.")

    if resolution.rejected:
        lines.append("")
        lines.append(f"Rejected ({len(resolution.rejected)} candidates):")
        by_kind: dict[str, list[Rejection]] = {}
        for rejection in resolution.rejected:
            by_kind.setdefault(rejection.reason.kind, []).append(rejection)
        for kind in FAILURE_ORDER:
            group = by_kind.get(kind)
            if not group:
                continue
            lines.append(f"  {GROUP_TITLES[kind]} ({len(group)}):")
            shown = group if verbose else group[:SHOWN_PER_GROUP]
            for rejection in shown:
                label = candidate_label(rejection.framework, rejection.release, rejection.variant)
                lines.append(f"    {label}: {rejection.reason.text}")
            if len(group) > len(shown):
                lines.append(f"    ... {len(group) - len(shown)} more (--verbose or --json lists every one)")

    if resolution.closest and not resolution.stacks:
        lines.append("")
        lines.append("Closest misses, and what to relax:")
        for miss in resolution.closest:
            label = candidate_label(miss.framework, miss.release, miss.variant)
            reasons = "; ".join(f.text for f in miss.failures)
            relax = [f.relax for f in miss.failures if f.relax]
            cuda = _miss_cuda(miss)
            if relax:
                lines.append(f"  {' and '.join(relax)} would allow {label}{cuda}")
                lines.append(f"      ({reasons})")
            else:
                lines.append(f"  {label}: {reasons}")
    return "\n".join(lines).rstrip() + "\n"


def _branch_note(matrix: Matrix, driver: Driver) -> str:
    """ " (PB, EOL 2025-04)": a researcher on a fixed driver wants to know how long it lasts."""
    row = matrix.branches.get(driver.branch)
    if row is None:
        return ""
    parts = [] if driver.bare else [f"R{driver.branch}"]
    parts.append(f"{row.type}, type {row.prov.confidence}" if row.prov.confidence else row.type)
    if row.eol:
        parts.append(f"EOL {row.eol}")
    return f" ({', '.join(parts)})"


def _miss_cuda(miss: Rejection) -> str:
    variant = miss.variant
    if variant.cuda:
        return f" (CUDA {format_minor(variant.cuda)})"
    if variant.cuda_min:
        return f" (CUDA >= {format_minor(variant.cuda_min)})"
    return ""
