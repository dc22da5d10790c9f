"""An audit as text (per library: SASS, PTX, a verdict per GPU) and as JSON."""

from __future__ import annotations

import json

from envbuild.audit import duplicates
from envbuild.audit.kernels import Kernels
from envbuild.audit.libraries import FRAMEWORK_LIBRARIES
from envbuild.audit.tree import Audit, unreadable_fix
from envbuild.audit.verdict import NO_KERNEL_MESSAGE, RUNS
from envbuild.matrix.versions import format_cc, sm_name

_SAY = {
    "native": "native SASS",
    "same-major": "SASS of the same major (runs)",
    "ptx-only": "PTX JIT only (compiles at first launch; needs a driver as new as the PTX)",
}


def _how_read(kernels: Kernels) -> str:
    """ "whole", "partly" (judged by the entries listed before cuobjdump stopped) or "not read"."""
    return "not read" if kernels.not_read else "partly" if kernels.partly_read else "whole"


def _shown(arches: tuple[str, ...]) -> str:
    return ", ".join(arches) if arches else "none"


def to_text(audit: Audit) -> str:
    lines = [f"audit {audit.target}" + (f" ({audit.framework})" if audit.framework else "")]
    if audit.gpus:
        lines[0] += ": " + ", ".join(f"{g.name} ({sm_name(g.cc)}, {format_cc(g.cc)})" for g in audit.gpus)
    for library in audit.libraries:
        mark = "" if library.counts else "  (not one the framework loads its kernels from)"
        lines += [
            "",
            f"{library.path}{mark}",
            f"  SASS: {_shown(library.kernels.sass)}",
            f"  PTX:  {_shown(library.kernels.ptx)}",
        ]
        if library.skipped is not None:
            lines.append(f"  not judged, skipped ({library.skipped.source}): {library.skipped.reason}")
            if library.kernels.unread is not None:
                lines.append(f"  {_how_read(library.kernels)}: {library.kernels.unread}")
            continue
        if library.kernels.not_read:
            lines.append(f"  not read: {library.kernels.unread}")
            continue
        if library.kernels.partly_read:
            lines.append(f"  partly read, judged by the entries listed: {library.kernels.unread}")
        for gpu, verdict in library.verdicts:
            lines.append(f"  {gpu}: {_SAY.get(verdict, NO_KERNEL_MESSAGE)}")
    if audit.without_device_code:
        lines += ["", f"{len(audit.without_device_code)} shared object(s) without device code"]
    if not audit.libraries:
        lines += ["", "no shared object with device code"]
    lines += _duplicates_text(audit)
    for gpu, path in audit.failures:
        lines.append(f"error: {gpu}: {NO_KERNEL_MESSAGE} ({path})")
    for library in audit.unreadable:
        lines.append(f"error: {library.path}: not read ({library.kernels.unread})")
    if audit.unreadable:
        lines.append(f"fix: {unreadable_fix(audit.unreadable)}")
    for skip in audit.skips:
        paths = audit.skip_paths(skip)
        if paths:
            lines.append(f"skipped ({skip.source}): {skip.library}, not judged: {skip.reason}")
        else:
            lines.append(f"warning: {skip.source} {skip.library}: {audit.target} has no library of that name")
    if audit.framework_missing:
        wanted = ", ".join(FRAMEWORK_LIBRARIES[audit.framework])
        lines.append(
            f"error: no {audit.framework} library with device code ({wanted}):"
            " its GPU ops would run on no GPU (a CPU-only build?)"
        )
    return "\n".join(lines) + "\n"


def _duplicates_text(audit: Audit) -> list[str]:
    """The CUDA libraries present more than once, each copy with its version and bytes; a warning."""
    if not audit.duplicates:
        return []
    found = duplicates.warning(audit.duplicates, audit.framework)
    lines = ["", f"warning: {found}"]
    for duplicate in audit.duplicates:
        lines.append(
            f"  {duplicate.library} ({duplicate.component}), {len(duplicate.copies)} copies, "
            f"{duplicates.megabytes(duplicate.wasted)} wasted:"
        )
        for copy in duplicate.copies:
            mark = "loaded" if copy.loaded else "      " if copy.loaded is False else "     ?"
            version = copy.version or "version unknown"
            lines.append(f"    {mark} {copy.path}  {version}  {duplicates.megabytes(copy.size)}")
    return lines


def to_document(audit: Audit) -> dict:
    return {
        "target": audit.target,
        "framework": audit.framework,
        "gpus": [{"name": g.name, "compute_capability": format_cc(g.cc)} for g in audit.gpus],
        "libraries": [
            {
                "path": library.path,
                "sass": list(library.kernels.sass),
                "ptx": list(library.kernels.ptx),
                "counts": library.counts,
                "verdicts": dict(library.verdicts) if library.judged else {},
                "read": _how_read(library.kernels),
                "unread": library.kernels.unread,
                "skipped": None if library.skipped is None else library.skipped.reason,
            }
            for library in audit.libraries
        ],
        "unreadable": [
            {"library": library.path, "error": library.kernels.unread} for library in audit.unreadable
        ],
        "without_device_code": list(audit.without_device_code),
        "duplicates": duplicates.document(audit.duplicates),
        "duplicate_bytes": duplicates.total_wasted(audit.duplicates),
        "skipped": [skip.document(audit.skip_paths(skip)) for skip in audit.skips],
        "warnings": [
            f"{skip.source} {skip.library}: {audit.target} has no library of that name"
            for skip in audit.skips_unmatched
        ],
        "ok": audit.ok,
        "failures": [
            {"gpu": gpu, "library": path, "error": NO_KERNEL_MESSAGE} for gpu, path in audit.failures
        ],
        "framework_missing": audit.framework_missing,
        "runs": {
            g.name: not audit.framework_missing
            and not audit.unreadable
            and all(
                dict(lib.verdicts)[g.name] in RUNS for lib in audit.libraries if lib.counts and lib.judged
            )
            for g in audit.gpus
        },
    }


def to_json(audit: Audit) -> str:
    return json.dumps(to_document(audit), indent=2, sort_keys=True) + "\n"
