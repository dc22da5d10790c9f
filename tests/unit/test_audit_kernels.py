"""The reader: cuobjdump listings parsed, objects found in a tree, and which libraries decide the exit.

Listings are captured from cuobjdump 13 on jax-cuda12-plugin 0.10.2 (tests/fixtures/audit); the
objects without device code are real ELF files (this Python's binary), read by the real cuobjdump.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envbuild.audit.kernels import Kernels, arch_key, parse_listing, read_kernels
from envbuild.audit.libraries import counts_for, framework_of
from envbuild.audit.tree import audit_tree, is_shared_object_name, shared_objects
from envbuild.errors import EnvbuildError, UsageError
from tests.helpers.audit import plain_elf, truncated
from tests.helpers.paths import FIXTURES

CAPTURES = FIXTURES / "audit"
JAX_SASS = ("sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120")


def _lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


def test_parse_listing_of_a_real_object() -> None:
    lines = _lines("jax_cuda12_plugin-0.10.2-_prng.list-elf.txt") + _lines(
        "jax_cuda12_plugin-0.10.2-_prng.list-ptx.txt"
    )
    assert parse_listing(lines) == Kernels(sass=JAX_SASS, ptx=("compute_120",))


def test_parse_listing_merges_repeated_entries() -> None:
    """_solver.so carries two kernel sets (16 cubins, 2 PTX): the arch sets are what a GPU sees."""
    lines = _lines("jax_cuda12_plugin-0.10.2-_solver.list-elf.txt")
    lines += _lines("jax_cuda12_plugin-0.10.2-_solver.list-ptx.txt")
    assert len(lines) == 18
    assert parse_listing(lines) == Kernels(sass=JAX_SASS, ptx=("compute_120",))


def test_parse_listing_without_device_code_is_empty() -> None:
    kernels = parse_listing(_lines("jax_cuda12_plugin-0.10.2-cuda_plugin_extension.list-elf-ptx.txt"))
    assert kernels == Kernels(sass=(), ptx=()) and not kernels.has_device_code


def test_parse_listing_reads_suffixes_and_sorts_by_capability() -> None:
    """Lines in cuobjdump's format with the a/f suffixes CUDA 12 builds carry (sm_90a, sm_100f)."""
    lines = [
        "ELF file    1: kernels.1.sm_120.cubin",
        "ELF file    2: kernels.2.sm_100f.cubin",
        "ELF file    3: kernels.3.sm_90a.cubin",
        "ELF file    4: kernels.4.sm_100.cubin",
        "ELF file    5: kernels.5.sm_90.cubin",
        "ELF file    6: kernels.6.sm_75.cubin",
        "PTX file    1: kernels.1.sm_100a.ptx",
        "PTX file    2: kernels.2.sm_90.ptx",
    ]
    assert parse_listing(lines) == Kernels(
        sass=("sm_75", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120"),
        ptx=("compute_90", "compute_100a"),
    )


def test_arch_key_orders_by_capability_then_suffix() -> None:
    arches = ["compute_120", "sm_101", "sm_90a", "sm_100f", "sm_90", "sm_100", "sm_75"]
    assert sorted(arches, key=arch_key) == [
        "sm_75",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_100f",
        "sm_101",
        "compute_120",
    ]


def test_parse_listing_refuses_an_entry_it_cannot_read() -> None:
    with pytest.raises(EnvbuildError, match=r"cannot read: 'kernels\.1\.cubin'"):
        parse_listing(["ELF file    1: kernels.1.cubin"])


def test_object_without_device_code_is_reported_not_an_error(tmp_path: Path) -> None:
    kernels = read_kernels(str(plain_elf(tmp_path / "libplain.so")))
    assert kernels == Kernels(sass=(), ptx=())


def test_truncated_object_is_refused_not_passed_as_plain(tmp_path: Path) -> None:
    """cuobjdump says "does not contain device code" for a cut-off file; the audit must not."""
    whole = plain_elf(tmp_path / "whole.so")
    cut = truncated(whole, tmp_path / "libcut.so", whole.stat().st_size // 2)
    with pytest.raises(UsageError, match=r"libcut\.so: truncated ELF file") as caught:
        read_kernels(str(cut))
    assert caught.value.fix


def test_non_elf_object_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "libtext.so"
    text.write_text("INPUT(-lfoo)\n")  # a linker script named .so, as glibc ships them
    with pytest.raises(UsageError, match=r"libtext\.so: not an ELF shared object"):
        read_kernels(str(text))


@pytest.mark.parametrize(
    ("name", "shared"),
    [
        ("libfoo.so", True),
        ("libcudart.so.12", True),
        ("libcublasLt.so.12.4.5.8", True),
        ("_linalg.cpython-311-x86_64-linux-gnu.so", True),
        ("ld.so.conf", False),
        ("foo.so.py", False),
        ("x.sources", False),
        ("libfoo.so.12.bak", False),
        ("libfoo.a", False),
    ],
)
def test_is_shared_object_name(name: str, shared: bool) -> None:
    assert is_shared_object_name(name) is shared


def test_shared_objects_finds_versioned_elf_files_once(tmp_path: Path) -> None:
    plain_elf(tmp_path / "lib" / "libfoo.so.12")
    os.symlink("libfoo.so.12", tmp_path / "lib" / "libfoo.so")  # one library, two names
    plain_elf(tmp_path / "pkg" / "_ext.so")
    plain_elf(tmp_path / "etc" / "ld.so.conf")  # ELF bytes, not a library name
    (tmp_path / "lib" / "libscript.so").write_text("INPUT(-lfoo)\n")
    (tmp_path / "pkg" / "mod.so.py").write_text("x = 1\n")
    assert shared_objects(str(tmp_path)) == ["lib/libfoo.so.12", "pkg/_ext.so"]


def test_audit_tree_of_plain_objects_passes_and_lists_them(tmp_path: Path) -> None:
    for name in ("a/liba.so", "b/libb.so.1", "c/libc.so"):
        plain_elf(tmp_path / name)
    audit = audit_tree(str(tmp_path), (), target=str(tmp_path))
    assert audit.libraries == () and audit.ok
    assert audit.without_device_code == ("a/liba.so", "b/libb.so.1", "c/libc.so")


COUNTS = [  # (path inside the artifact, framework, decides the exit)
    ("torch/lib/libtorch_cuda.so", "torch", True),
    ("site-packages/torch/lib/libtorch_cuda_linalg.so", "torch", True),
    ("nvidia/cublas/lib/libcublasLt.so.12", "torch", False),
    ("torch/lib/libtorch_cuda.so", "jax", False),
    ("jax_cuda12_plugin/_linalg.so", "jax", True),
    ("jax_plugins/xla_cuda12/xla_cuda_plugin.so", "jax", True),
    ("nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "jax", False),
    ("tensorflow/python/_pywrap_tensorflow_internal.so", "tensorflow", True),
    ("tensorflow/libtensorflow_cc.so.2", "tensorflow", True),
    ("nvidia/cublas/lib/libcublasLt.so.12", None, True),
    ("anything/libkernels.so", None, True),
]


@pytest.mark.parametrize(("path", "framework", "counts"), COUNTS)
def test_counts_for(path: str, framework: str | None, counts: bool) -> None:
    assert counts_for(path, framework) is counts


def test_counts_for_an_unknown_framework_is_refused_not_silently_nothing() -> None:
    """Otherwise no library would count and every GPU would pass."""
    with pytest.raises(UsageError, match="unknown framework 'pytorch'") as caught:
        counts_for("torch/lib/libtorch_cuda.so", "pytorch")
    assert "jax, tensorflow, torch" in (caught.value.fix or "")


def test_framework_of() -> None:
    assert framework_of(["jax_cuda12_plugin/_linalg.so", "nvidia/cublas/lib/libcublas.so.12"]) == "jax"
    assert framework_of(["torch/lib/libtorch_cuda.so", "jax_cuda12_plugin/_prng.so"]) is None
    assert framework_of(["nvidia/cublas/lib/libcublas.so.12"]) is None
