"""cuobjdump that stops partway (issue 32): NVIDIA's cuobjdump 13.5 lists 1213 ELF and 191 PTX entries
of cuBLAS 12.4.5.8's libcublas.so.12, then exits 1 with "Invalid ELF". The run is replayed from its
capture (tests/fixtures/audit/nvidia_cublas_cu12-12.4.5.8-libcublas.so.12.*); the library handed to
it is a real, whole ELF file (this Python's binary), so check_elf passes as it does for the real one.

The rules: the entries listed are kept and judged, and the library is "partly read", with why; a
library that decides nothing never fails the audit or the build's gate; one that decides and was not
read at all fails, saying which library, which cuobjdump, and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.audit.kernels import Kernels, read_kernels
from envbuild.audit.report import to_document, to_text
from envbuild.audit.tree import UNREADABLE_FIX, judge_tree
from envbuild.image import auditcache
from envbuild.image.auditgate import judge_audit
from envbuild.image.layerfacts import LayerFacts
from envbuild.matrix.load import load_matrix
from envbuild.resolve.query import parse_gpu
from tests.helpers.audit import plain_elf, replaying_cuobjdump
from tests.helpers.paths import FIXTURES

CAPTURED = "nvidia_cublas_cu12-12.4.5.8-libcublas.so.12"
RUN = FIXTURES / "audit" / f"{CAPTURED}.run.json"  # exit code, stderr, --version
LISTING = FIXTURES / "audit" / f"{CAPTURED}.list-elf-ptx.txt"  # its stdout
VERSION = "cuobjdump 13.5 (V13.5.37)"
TORCH_CUDA = "site-packages/torch/lib/libtorch_cuda.so"
CUBLAS_PATH = "site-packages/nvidia/cublas/lib/libcublas.so.12"
HOPPER = Kernels(sass=("sm_80", "sm_90"), ptx=("compute_90",))


@pytest.fixture(scope="module")
def h100():
    return (parse_gpu("H100", load_matrix()),)


@pytest.fixture
def partly(tmp_path: Path) -> Kernels:
    binary = replaying_cuobjdump(tmp_path, RUN, LISTING)
    return read_kernels(str(plain_elf(tmp_path / "libcublas.so.12")), binary)


@pytest.fixture
def unread(tmp_path: Path) -> Kernels:
    """The same failure with nothing listed first: whether it has device code is unknown."""
    binary = replaying_cuobjdump(tmp_path, RUN)
    return read_kernels(str(plain_elf(tmp_path / "libcublas.so.12")), binary)


def test_the_entries_listed_before_cuobjdump_stopped_are_kept(partly: Kernels) -> None:
    listing = LISTING.read_text().splitlines()
    assert sum(line.startswith("ELF file") for line in listing) == 1213
    assert sum(line.startswith("PTX file") for line in listing) == 191
    assert partly.partly_read and not partly.not_read
    assert "sm_90" in partly.sass and "sm_80" in partly.sass and "compute_90" in partly.ptx
    assert partly.unread == (
        f"{VERSION} stopped after listing 1404 entries (exit 1): "
        "cuobjdump fatal   : Invalid ELF in 'libcublas.so.12'"
    )


def test_nothing_listed_is_not_read_and_is_not_no_device_code(unread: Kernels) -> None:
    assert unread.not_read and not unread.has_device_code
    assert unread.unread and unread.unread.startswith(f"{VERSION} stopped before listing any entry (exit 1)")


def test_a_partly_read_library_that_decides_nothing_passes_and_is_reported(partly: Kernels, h100) -> None:
    audit = judge_tree({TORCH_CUDA: HOPPER, CUBLAS_PATH: partly}, h100, target="image", framework="torch")
    assert audit.ok and audit.failures == [] and audit.unreadable == []
    assert [library.path for library in audit.partly_read] == [CUBLAS_PATH]
    text = to_text(audit)
    assert f"partly read, judged by the entries listed: {VERSION} stopped" in text
    document = to_document(audit)
    (cublas,) = (entry for entry in document["libraries"] if entry["path"] == CUBLAS_PATH)
    assert cublas["read"] == "partly" and cublas["unread"] == partly.unread and cublas["counts"] is False
    gate = judge_audit(audit, "default")
    assert gate.error is None and gate.document["ok"] is True
    assert any(
        w.startswith(f"{CUBLAS_PATH}: partly read (not one that decides): {VERSION}") for w in gate.warnings()
    )


def test_with_no_framework_every_library_decides_and_a_partly_read_one_is_judged(
    partly: Kernels, h100
) -> None:
    """`envbuild audit nvidia_cublas_cu12-12.4.5.8-....whl --gpu H100` exited 1 on this library: it is
    judged by its 1404 entries now, which carry sm_90."""
    audit = judge_tree({CUBLAS_PATH: partly}, h100, target="nvidia_cublas_cu12-12.4.5.8.whl")
    assert audit.framework is None and audit.libraries[0].counts
    assert audit.ok and dict(audit.libraries[0].verdicts) == {"H100": "native"}


def test_a_deciding_library_not_read_fails_with_the_library_the_cuobjdump_and_the_fix(
    unread: Kernels, h100
) -> None:
    audit = judge_tree({TORCH_CUDA: unread}, h100, target="image", framework="torch")
    assert not audit.ok and audit.failures == []  # not "no kernel image": nothing was seen
    assert [library.path for library in audit.unreadable] == [TORCH_CUDA]
    assert not audit.framework_missing
    text = to_text(audit)
    assert f"error: {TORCH_CUDA}: not read ({VERSION} stopped before listing any entry" in text
    assert f"fix: {UNREADABLE_FIX}" in text
    assert "complete ELF" not in text  # that fix is for a truncated file (check_elf), not this
    document = to_document(audit)
    assert document["ok"] is False and document["runs"] == {"H100": False}
    assert document["unreadable"] == [{"library": TORCH_CUDA, "error": unread.unread}]
    gate = judge_audit(audit, "default")
    assert gate.error is not None and gate.document["ok"] is False and gate.labels == {}
    assert TORCH_CUDA in gate.error.message and VERSION in gate.error.message
    assert "pip install -U nvidia-cuda-cuobjdump" in gate.error.fix and "nothing was tagged" in gate.error.fix


def test_a_library_not_read_that_decides_nothing_only_warns(unread: Kernels, h100) -> None:
    audit = judge_tree({TORCH_CUDA: HOPPER, CUBLAS_PATH: unread}, h100, target="image", framework="torch")
    assert audit.ok and audit.unreadable == []
    gate = judge_audit(audit, "default")
    assert gate.error is None and gate.labels == {"io.envbuild.audit.sm_90": "native"}
    assert any(w.startswith(f"{CUBLAS_PATH}: not read (not one that decides)") for w in gate.warnings())
    assert json.loads(json.dumps(to_document(audit)))["libraries"][1]["read"] == "not read"


def test_the_audit_cache_keeps_why_a_read_stopped(partly: Kernels, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    layer = "sha256:" + "ab" * 32
    binary = plain_elf(tmp_path / "any-cuobjdump")  # the cache keys on the binary's bytes
    facts = LayerFacts(
        deleted=frozenset(),
        opaque=frozenset(),
        replaced=frozenset(),
        objects={CUBLAS_PATH: partly, TORCH_CUDA: HOPPER},
    )
    auditcache.store_layer(layer, str(binary), facts)
    assert auditcache.load_layer(layer, str(binary)) == facts
