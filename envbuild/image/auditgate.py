"""The audit gate of `envbuild build` and `envbuild verify`: the image's GPU kernels, judged for the
GPUs it is built for, before the smoke step, on any runner (a CPU CI included).

The rule, in one place:

- a GPU with **no kernel image** in a library the framework loads its kernels from fails the gate
  (VerifyError, exit 1): the GPU would fail the first CUDA op with exactly that message, and the
  image is not tagged;
- native SASS, SASS of the same major and PTX JIT pass; the worst of them across the framework's
  libraries is the GPU's verdict, in record.json and in the promoted image's
  `io.envbuild.audit.<sm_XY>` label;
- framework libraries **without device code** (a CPU-only wheel: the test images are CPU builds by
  necessity) pass with a warning in the record and no verdict or label for the GPU. A CPU-only build
  in a GPU image is broken too, but the smoke step on a GPU runner is what proves that; the gate
  fails only on what the artifact shows will not run;
- a target without GPUs gets the kernels listed, and no verdict;
- a library cuobjdump stops on partway is judged by the entries it listed and reported as partly
  read; one it can read nothing of fails the gate when it is a framework library (the audit cannot
  decide it), and is only reported when it is not (cuBLAS, cuDNN, NCCL: the matrix's business);
- a CUDA library present more than once (an nvidia/cuda base's cuBLAS beside torch's nvidia-cublas
  wheel) is a warning with each copy and the bytes wasted (audit.duplicates), never a failure.
- a library the team chose not to judge (`--skip-audit LIBRARY="REASON"`, `[audit] skip`) is listed
  without a verdict and passes with a warning; the skip, its reason and where it was made go into
  the record (under "audit", "skipped") and from there into the SBOM. A skip naming a library the
  image does not have is a warning, not an error: the decision may predate a rebuild that fixed it.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit import duplicates
from envbuild.audit.tree import unreadable_fix
from envbuild.audit.verdict import NATIVE, NO_KERNEL, NO_KERNEL_MESSAGE, PTX_ONLY, RUNS, SAME_MAJOR
from envbuild.errors import VerifyError
from envbuild.image.filesystem import audit_image_layers
from envbuild.matrix.versions import format_cc, sm_name
from envbuild.oci.labels import audit_label

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from envbuild.audit.skip import AuditSkip
    from envbuild.audit.tree import Audit
    from envbuild.matrix.model import Gpu

WORST_LAST = (NATIVE, SAME_MAJOR, PTX_ONLY, NO_KERNEL)


def no_device_code_warning(framework: str | None) -> str:
    whose = f"{framework}'s libraries" if framework else "the image's libraries"
    return f"no device code in {whose}: a CPU build, so no GPU gets a verdict"


class Gate(Record):
    """document: what record.json keeps under "audit"; labels: io.envbuild.audit.* for promote;
    error: the VerifyError that fails the stage, or None."""

    __slots__ = ("document", "labels", "error")
    document: dict
    labels: dict[str, str]
    error: VerifyError | None

    def warnings(self) -> list[str]:
        return list(self.document["warnings"])

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def judge_audit(audit: Audit, where: str, wheels: Mapping[str, str] | None = None) -> Gate:
    """The gate's answer for an audit already made (`where` starts the error message). wheels:
    {distribution: version} the build installed (its lock), which give the wheel copies of a
    duplicated CUDA library their versions."""
    counted = [library for library in audit.libraries if library.counts and library.judged]
    gpus: dict[str, dict] = {}
    for gpu in audit.gpus:
        verdicts = [dict(library.verdicts)[gpu.name] for library in counted]
        entry = gpus.setdefault(
            sm_name(gpu.cc), {"names": [], "compute_capability": format_cc(gpu.cc), "verdict": None}
        )
        entry["names"].append(gpu.name)
        if verdicts:
            entry["verdict"] = max(verdicts, key=WORST_LAST.index)
    skipped_deciding = [library for library in audit.skipped if library.counts]
    warnings = []
    if not counted and not audit.unreadable and not skipped_deciding:
        warnings.append(no_device_code_warning(audit.framework))
    warnings += [
        f"{library.path}: {'partly read' if library.kernels.partly_read else 'not read'}"
        f"{'' if library.counts else ' (not one that decides)'}: {library.kernels.unread}"
        for library in audit.libraries
        if library.kernels.unread is not None
        and library.skipped is None
        and not (library.counts and library.kernels.not_read)
    ]
    warnings += [
        f"{library.path}: not judged, skipped by {library.skipped.source}: {library.skipped.reason}"
        for library in audit.skipped
        if library.skipped is not None
    ]
    warnings += [
        f"{skip.source} {skip.library}: the image has no library of that name, so nothing was skipped"
        for skip in audit.skips_unmatched
    ]
    duplicated = duplicates.with_wheel_versions(audit.duplicates, wheels or {})
    found = duplicates.warning(duplicated, audit.framework)  # a cost in bytes, never a failure
    warnings += [found] if found else []
    document = {
        "framework": audit.framework,
        # the gate's rule, not `envbuild audit`'s: no device code only warns
        "ok": not audit.failures and not audit.unreadable,
        "gpus": gpus,
        "libraries": [
            {
                "path": library.path,
                "sass": list(library.kernels.sass),
                "ptx": list(library.kernels.ptx),
                "counts": library.counts,
                "unread": library.kernels.unread,
                "skipped": None if library.skipped is None else library.skipped.reason,
            }
            for library in audit.libraries
        ],
        "without_device_code": len(audit.without_device_code),
        "duplicates": duplicates.document(duplicated),
        "duplicate_bytes": duplicates.total_wasted(duplicated),
        # the team's decisions not to judge a library, kept with the image's record and SBOM
        "skipped": [skip.document(audit.skip_paths(skip)) for skip in audit.skips],
        "warnings": warnings,
    }
    labels = {audit_label(key): entry["verdict"] for key, entry in gpus.items() if entry["verdict"] in RUNS}
    error = None
    if audit.failures:
        failed = "; ".join(f"{gpu}: {NO_KERNEL_MESSAGE} ({path})" for gpu, path in audit.failures)
        error = VerifyError(
            f"{where}: the audit failed before the smoke step: {failed}",
            fix="nothing was tagged; pick a framework build whose kernels cover these GPUs, or drop "
            "them from the target (`envbuild audit IMAGE --gpu GPU` lists each library's SASS and PTX)",
        )
    elif audit.unreadable:
        failed = "; ".join(f"{library.path}: {library.kernels.unread}" for library in audit.unreadable)
        error = VerifyError(
            f"{where}: the audit cannot judge a library the framework loads its kernels from: {failed}",
            fix=f"nothing was tagged; {unreadable_fix(audit.unreadable)}",
        )
    return Gate(document=document, labels=labels, error=error)


def audit_gate(
    image: str,
    gpus: tuple[Gpu, ...],
    framework: str | None,
    where: str,
    say: Callable[[str], None] | None = None,
    *,
    wheels: Mapping[str, str] | None = None,
    skip: tuple[AuditSkip, ...] = (),
) -> Gate:
    """Audit `image` (a local image id or name, or REPO@sha256:...) and judge it for `gpus`, not
    judging the libraries `skip` names; the document says how many layers were read and how many the
    cache answered. `wheels` (name -> version, the build's) give a duplicated CUDA library's wheel
    copy its exact version."""
    audit, read = audit_image_layers(image, gpus, framework, say=say, skip=skip)
    gate = judge_audit(audit, where, wheels)
    gate.document["layers"] = read.document()
    return gate


def summary(gate: Gate) -> str:
    """One line per GPU key, and the warnings, for a terminal."""
    lines = [
        f"audit: {key} ({', '.join(entry['names'])}): {entry['verdict'] or 'no verdict'}"
        for key, entry in gate.document["gpus"].items()
    ]
    lines += [f"audit: warning: {warning}" for warning in gate.document["warnings"]]
    return "\n".join(lines) + ("\n" if lines else "")
