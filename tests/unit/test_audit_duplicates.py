"""CUDA libraries present more than once (issue 32, item 5): each copy with its version, path and bytes,
the copy the framework loads, and the bytes the others waste; a warning, never a failure.

The path and size lists are tests/fixtures/audit/duplicates (README there): the real torch 2.6.0 cu124
image's shared objects, and a synthetic nvidia/cuda 12.4.1 layer whose sizes are that image's wheel
copies' real sizes. Expected figures are computed from the fixtures, not typed in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from envbuild.audit.duplicates import (
    document,
    find_duplicates,
    is_wheel_copy,
    library_of,
    megabytes,
    total_wasted,
    with_wheel_versions,
)
from envbuild.audit.kernels import Kernels
from envbuild.audit.report import to_document, to_text
from envbuild.audit.tree import judge_tree, read_tree
from envbuild.image import auditcache
from envbuild.image.auditgate import judge_audit
from envbuild.image.layerfacts import LayerFacts
from tests.helpers.audit import plain_elf
from tests.helpers.paths import FIXTURES

LISTS = FIXTURES / "audit" / "duplicates"
SITE = "opt/venv/lib/python3.11/site-packages"
TORCH = (f"{SITE}/torch/lib/libtorch_cuda.so", f"{SITE}/torch/lib/libtorch_cuda_linalg.so")
FLAVORS = ("base", "runtime", "cudnn")  # each nvidia/cuda flavor holds its own and the ones before
# the nvidia-* wheels the real image installed, as PyPI names their files (/tmp/cuda-wheels)
WHEEL_FILES = (
    "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_cupti_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_nvrtc_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cufft_cu12-11.2.1.3-py3-none-manylinux2014_x86_64.whl",
    "nvidia_curand_cu12-10.3.5.147-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cusolver_cu12-11.6.1.9-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cusparse_cu12-12.3.1.170-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nccl_cu12-2.21.5-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nvjitlink_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nvtx_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
)
WHEELS = {str(parse_wheel_filename(f)[0]): str(parse_wheel_filename(f)[1]) for f in WHEEL_FILES}


def rows(name: str) -> list[list[str]]:
    return [line.split() for line in (LISTS / name).read_text().splitlines() if not line.startswith("#")]


def real_image() -> dict[str, int]:
    """{path inside the image: bytes} of the real torch 2.6.0 cu124 image (paths as the audit has them)."""
    return {path.lstrip("/"): int(size) for path, size in rows("torch-2.6.0-cu124-wheels.txt")}


def nvidia_cuda(flavor: str) -> dict[str, int]:
    """The synthetic nvidia/cuda 12.4.1 layer of `flavor`."""
    wanted = FLAVORS[: FLAVORS.index(flavor) + 1]
    return {
        p.lstrip("/"): int(size)
        for p, size, adds in rows("nvidia-cuda-12.4.1-synthetic.txt")
        if adds in wanted
    }


def by_library(found) -> dict:
    return {duplicate.library: duplicate for duplicate in found}


def test_the_real_image_holds_cupti_twice_through_triton() -> None:
    """triton 3.2.0 ships CUPTI (three separate files of libcupti, and its helpers) beside the
    nvidia-cuda-cupti-cu12 wheel's; torch loads the wheel's (its RPATH names nvidia/cuda_cupti/lib)."""
    sizes = real_image()
    found = by_library(find_duplicates(sizes, "torch", TORCH))
    triton = {p: s for p, s in sizes.items() if "/triton/backends/nvidia/lib/cupti/" in p}
    known = [library_of(os.path.basename(p)) for p in triton]  # libcheckpoint.so: too generic a name
    assert set(found) == {entry[0] for entry in known if entry}
    assert set(found) == {"libcupti", "libnvperf_host", "libnvperf_target", "libpcsamplingutil"}
    cupti = found["libcupti"]
    assert cupti.component == "CUPTI" and len(cupti.copies) == 4
    assert [c.path for c in cupti.copies if c.loaded] == [f"{SITE}/nvidia/cuda_cupti/lib/libcupti.so.12"]
    assert {c.path: c.version for c in cupti.copies if not c.loaded} == {
        f"{SITE}/triton/backends/nvidia/lib/cupti/libcupti.so": None,
        f"{SITE}/triton/backends/nvidia/lib/cupti/libcupti.so.12": "12",
        f"{SITE}/triton/backends/nvidia/lib/cupti/libcupti.so.2024.1.0": "2024.1.0",
    }
    assert total_wasted(tuple(found.values())) == sum(
        size for path, size in triton.items() if library_of(os.path.basename(path))
    )
    # the report's order: the most bytes wasted first
    assert next(d.library for d in find_duplicates(sizes, "torch", TORCH)) == "libnvperf_host"


def test_a_cudnn_runtime_base_duplicates_every_library_torch_brings() -> None:
    """The base-image strategy's old choice for torch: nvidia/cuda:12.4.1-cudnn-runtime plus torch's
    nvidia-* wheels. Every library of the image is a second copy, and torch loads the wheel's."""
    image = nvidia_cuda("cudnn")
    found = by_library(find_duplicates({**real_image(), **image}, "torch", TORCH))
    for path, size in image.items():
        duplicate = found[library_of(os.path.basename(path))[0]]  # type: ignore[index]
        (system,) = [c for c in duplicate.copies if c.path == path]
        (wheel,) = [c for c in duplicate.copies if c.loaded]
        assert is_wheel_copy(wheel.path) and wheel.path.startswith(SITE + "/nvidia/")
        assert system.loaded is False and system.size == size == duplicate.wasted
        assert system.version == os.path.basename(path).split(".so.")[1]  # from the apt file name
    wasted = total_wasted(tuple(found.values())) - total_wasted(find_duplicates(real_image(), "torch", TORCH))
    assert wasted == sum(image.values())


def test_the_base_flavor_leaves_only_the_cuda_runtime_twice() -> None:
    """What picking `base` instead of `cudnn-runtime` saves, measured on the real image's wheel copies."""
    real = real_image()
    before = find_duplicates({**real, **nvidia_cuda("cudnn")}, "torch", TORCH)
    after = find_duplicates({**real, **nvidia_cuda("base")}, "torch", TORCH)
    assert set(by_library(after)) - set(by_library(find_duplicates(real, "torch", TORCH))) == {"libcudart"}
    saved = total_wasted(before) - total_wasted(after)
    assert saved == sum(nvidia_cuda("cudnn").values()) - sum(nvidia_cuda("base").values())
    assert megabytes(saved) == f"{saved / 1e9:.2f} GB" and saved > 2 * 10**9  # about 2.8 GB


def test_the_wheels_versions_come_from_the_build_and_the_images_from_their_file_names() -> None:
    found = with_wheel_versions(
        find_duplicates({**real_image(), **nvidia_cuda("cudnn")}, "torch", TORCH), WHEELS
    )
    cudart = by_library(found)["libcudart"]
    assert {(c.version, c.version_from) for c in cudart.copies} == {
        ("12.4.127", "nvidia-cuda-runtime-cu12"),  # libcudart.so.12 alone says only its soname
        ("12.4.127", "file name"),  # libcudart.so.12.4.127
    }
    cudnn = by_library(found)["libcudnn_adv"]
    assert {c.version for c in cudnn.copies} == {"9.1.0.70", "9.1.0"}
    # triton's copies are no wheel's: they keep what their names say
    cupti = by_library(found)["libcupti"]
    assert {c.version for c in cupti.copies if "triton" in c.path} == {None, "12", "2024.1.0"}
    assert {c.version for c in cupti.copies if "triton" not in c.path} == {"12.4.127"}


def test_without_a_framework_no_copy_is_called_loaded_and_the_least_waste_is_counted() -> None:
    sizes = {**real_image(), **nvidia_cuda("cudnn")}
    found = find_duplicates(sizes, None)
    assert all(copy.loaded is None for d in found for copy in d.copies)
    for duplicate in found:
        copies = [c.size for c in duplicate.copies]
        assert duplicate.wasted == sum(copies) - max(copies)


def test_an_image_that_loads_its_own_libraries_and_a_conda_env() -> None:
    """jax[cuda12-local] on nvidia/cuda: no nvidia-* wheels, so the image's copy (in the ld.so cache's
    directories) is the loaded one. A conda env loads its lib/; a copy left in pkgs/ is waste."""
    plugin = f"{SITE}/jax_plugins/xla_cuda12/xla_cuda_plugin.so"
    image = nvidia_cuda("cudnn")
    bundled = {
        f"{SITE}/somepkg.libs/libcudnn_ops.so.9.1.0": image["usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0"]
    }
    ops = by_library(find_duplicates({**image, **bundled}, "jax", (plugin,)))["libcudnn_ops"]
    assert [c.path for c in ops.copies if c.loaded] == ["usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0"]
    conda = {
        "opt/conda/lib/libcublasLt.so.12.6.4.1": 500,
        "opt/conda/pkgs/libcublas-12.6.4.1-0/lib/libcublasLt.so.12.6.4.1": 500,
    }
    torch = ("opt/conda/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",)
    (duplicate,) = find_duplicates(conda, "torch", torch)
    assert [c.path for c in duplicate.copies if c.loaded] == ["opt/conda/lib/libcublasLt.so.12.6.4.1"]


def test_only_cuda_libraries_count_and_a_hard_link_is_one_copy(tmp_path: Path) -> None:
    """Sizes come from the walk's stat: a second name of a hard-linked file adds 0 bytes, and is the
    same copy, not another; other libraries present twice are not this report's business."""
    root = tmp_path / "root"
    first = plain_elf(root / "usr/local/cuda-12.4/lib64/libcudart.so.12.4.127")
    os.link(first, root / "usr/local/cuda-12.4/lib64/libcudart.so.12")  # a hard link, not a copy
    plain_elf(root / "usr/lib/libz.so.1")
    plain_elf(root / "opt/libz.so.1")
    kernels = read_tree(str(root))
    sizes = {path: found.size for path, found in kernels.items()}
    assert sorted(sizes.values()) == sorted([first.stat().st_size] * 3 + [0])
    assert find_duplicates(sizes, None) == ()
    plain_elf(root / f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12")
    found = find_duplicates({p: k.size for p, k in read_tree(str(root)).items()}, None)
    assert [(d.library, len(d.copies)) for d in found] == [("libcudart", 2)]


def test_the_audit_report_and_the_gate_warn_and_never_fail() -> None:
    sizes = {**real_image(), **nvidia_cuda("cudnn")}
    kernels = {path: Kernels(sass=(), ptx=(), size=size) for path, size in sizes.items()}
    kernels[TORCH[0]] = Kernels(sass=("sm_90",), ptx=("compute_90",), size=sizes[TORCH[0]])
    audit = judge_tree(kernels, (), target="cuda:e2e", framework="torch")
    assert audit.ok and len(audit.duplicates) == 4 + len(nvidia_cuda("cudnn"))
    text = to_text(audit)
    wasted = megabytes(total_wasted(audit.duplicates))
    assert f"warning: {len(audit.duplicates)} CUDA libraries are present more than once (" in text
    assert f"{wasted} in copies torch does not load" in text
    assert f"    loaded {SITE}/nvidia/cudnn/lib/libcudnn_ops.so.9  9  108.4 MB" in text
    assert "           usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0  9.1.0  108.4 MB" in text
    data = json.loads(json.dumps(to_document(audit)))
    assert data["ok"] is True and data["duplicate_bytes"] == total_wasted(audit.duplicates)
    assert data["duplicates"] == document(audit.duplicates)
    gate = judge_audit(audit, "default", WHEELS)
    assert gate.error is None and gate.document["ok"] is True
    (warning,) = [w for w in gate.warnings() if "present more than once" in w]
    assert "libcudnn_engines_precompiled x2" in warning
    ops = next(d for d in gate.document["duplicates"] if d["library"] == "libcudnn_ops")
    assert {c["version"] for c in ops["copies"]} == {"9.1.0.70", "9.1.0"}


def test_the_cache_keeps_the_bytes_and_an_older_entry_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    binary = tmp_path / "cuobjdump"
    binary.write_bytes(b"\x7fELF cuobjdump")
    layer = "sha256:" + "1" * 64
    objects = {"usr/lib/libcudart.so.12.4.127": Kernels(sass=(), ptx=(), size=707904)}
    facts = LayerFacts(deleted=frozenset(), opaque=frozenset(), replaced=frozenset(), objects=objects)
    auditcache.store_layer(layer, str(binary), facts)
    assert auditcache.load_layer(layer, str(binary)) == facts
    (entry,) = (tmp_path / "cache" / "audit").glob("*.json")
    data = json.loads(entry.read_text())
    data["objects"] = [item[:4] for item in data["objects"]]  # what format 2 wrote: no bytes
    entry.write_text(json.dumps(data))
    assert auditcache.load_layer(layer, str(binary)) is None
    data["objects"] = [[*item, -1] for item in data["objects"]]
    entry.write_text(json.dumps(data))
    assert auditcache.load_layer(layer, str(binary)) is None
