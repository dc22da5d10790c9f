"""The audit gate's rule (envbuild.image.auditgate): a GPU with no kernel image in a library the
framework loads fails with the GPU's exact error; otherwise the worst verdict across the framework's
libraries is the GPU's, in the record and the promoted label; no device code is a warning, no verdict.

The kernel sets are those cuobjdump lists for jax-cuda12-plugin 0.10.2 (the engine tests read them
from the real wheel) and for a library built for sm_80 + compute_80 only."""

from __future__ import annotations

import pytest

from envbuild.audit.kernels import Kernels
from envbuild.audit.tree import Audit, LibraryAudit
from envbuild.audit.verdict import judge
from envbuild.errors import VerifyError
from envbuild.image.auditgate import judge_audit
from envbuild.matrix.model import Matrix
from envbuild.resolve.query import parse_gpu

JAX = Kernels(
    sass=("sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120"), ptx=("compute_120",)
)
AMPERE = Kernels(sass=("sm_80",), ptx=("compute_80",))
PLUGIN = "usr/local/lib/python3.11/site-packages/jax_cuda12_plugin"


def audit(matrix: Matrix, gpus: list[str], libraries: dict[str, tuple[Kernels, bool]]) -> Audit:
    chosen = tuple(parse_gpu(text, matrix) for text in gpus)
    return Audit(
        target="sha256:test",
        framework="jax",
        gpus=chosen,
        libraries=tuple(
            LibraryAudit(
                path=path,
                kernels=kernels,
                counts=counts,
                verdicts=tuple((gpu.name, judge(kernels.sass, kernels.ptx, gpu.cc)) for gpu in chosen),
            )
            for path, (kernels, counts) in libraries.items()
        ),
        without_device_code=("usr/lib/libc.so.6",),
    )


def test_a_gpu_without_a_kernel_image_fails_with_the_exact_error_and_gets_no_label(matrix: Matrix) -> None:
    gate = judge_audit(audit(matrix, ["K80", "RTX 5090"], {f"{PLUGIN}/_linalg.so": (JAX, True)}), "train")
    assert gate.document["gpus"]["sm_37"]["verdict"] == "no-kernel-image"
    assert gate.document["gpus"]["sm_120"]["verdict"] == "native"
    assert gate.labels == {"io.envbuild.audit.sm_120": "native"}
    with pytest.raises(VerifyError) as raised:
        gate.check()
    assert raised.value.message == (
        "train: the audit failed before the smoke step: Tesla K80: no kernel image is available for "
        f"execution on the device ({PLUGIN}/_linalg.so)"
    )
    assert raised.value.exit_code == 1


def test_the_worst_verdict_across_the_frameworks_libraries_is_the_gpus(matrix: Matrix) -> None:
    libraries = {f"{PLUGIN}/_linalg.so": (JAX, True), f"{PLUGIN}/_ampere.so": (AMPERE, True)}
    gate = judge_audit(audit(matrix, ["H100", "L4", "RTX 5090"], libraries), "train")
    gate.check()  # all three run
    assert gate.labels == {
        "io.envbuild.audit.sm_90": "ptx-only",  # sm_80 SASS is another major: compute_80 JIT
        "io.envbuild.audit.sm_89": "same-major",  # sm_80 SASS runs on 8.9
        "io.envbuild.audit.sm_120": "ptx-only",
    }
    assert [lib["path"] for lib in gate.document["libraries"]] == list(libraries)
    assert gate.document["without_device_code"] == 1 and gate.document["warnings"] == []


def test_a_library_the_framework_does_not_load_decides_nothing(matrix: Matrix) -> None:
    libraries = {f"{PLUGIN}/_linalg.so": (JAX, True), "opt/other/libold.so": (AMPERE, False)}
    gate = judge_audit(audit(matrix, ["RTX 5090", "T4"], libraries), "train")
    gate.check()
    assert gate.labels == {"io.envbuild.audit.sm_120": "native", "io.envbuild.audit.sm_75": "same-major"}


def test_no_device_code_in_the_frameworks_libraries_is_a_warning_without_verdict(matrix: Matrix) -> None:
    gate = judge_audit(audit(matrix, ["H100"], {"opt/other/libold.so": (AMPERE, False)}), "train")
    gate.check()  # a CPU build passes the gate: the smoke step on a GPU runner is what proves it
    assert gate.document["gpus"]["sm_90"]["verdict"] is None and gate.labels == {}
    assert gate.document["warnings"] == [
        "no device code in jax's libraries: a CPU build, so no GPU gets a verdict"
    ]


def test_a_target_without_gpus_lists_the_kernels_with_no_verdict(matrix: Matrix) -> None:
    gate = judge_audit(audit(matrix, [], {f"{PLUGIN}/_linalg.so": (JAX, True)}), "train")
    gate.check()
    assert gate.document["gpus"] == {} and gate.labels == {}
    assert gate.document["libraries"][0]["sass"] == list(JAX.sass)
