"""The bundled matrix against NVIDIA's and the frameworks' own tables, copied here by hand.

If a refresh changes one of these values the test fails on purpose: a human must look at the
primary source (named in each table) before the data changes.
"""

from __future__ import annotations

import re

import pytest

from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.model import Matrix, Variant
from envbuild.matrix.versions import format_driver, parse_driver
from envbuild.resolve.query import build_query
from envbuild.resolve.solver import candidate_label, native_cuda_of, resolve

# CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions", GA rows
# (https://docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html).
GA_FLOORS = {
    "11.0": "450.51.05",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
}
# CUDA Compatibility guide, minor-version compatibility
# (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
MINOR_COMPAT = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# Driver branch -> the CUDA it runs natively (nvidia-smi's "CUDA Version").
BRANCH_NATIVE = {
    450: "11.0",
    470: "11.4",
    510: "11.6",
    525: "12.0",
    535: "12.2",
    545: "12.3",
    550: "12.4",
    560: "12.6",
    570: "12.8",
    575: "12.9",
    580: "13.0",
    590: "13.1",
    595: "13.2",
}
# https://developer.nvidia.com/cuda-gpus
GPU_CC = {
    "Tesla K80": (3, 7),
    "V100": (7, 0),
    "T4": (7, 5),
    "A100": (8, 0),
    "A10": (8, 6),
    "RTX 3090": (8, 6),
    "RTX 4090": (8, 9),
    "L4": (8, 9),
    "L40S": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "B200": (10, 0),
    "RTX 5090": (12, 0),
    "GB10": (12, 1),
}


@pytest.mark.parametrize(("minor", "floor"), sorted(GA_FLOORS.items()))
def test_ga_floor_matches_table_3(matrix: Matrix, minor: str, floor: str) -> None:
    key = tuple(int(p) for p in minor.split("."))
    row = matrix.ga_floor[key]
    assert format_driver(row.min_driver) == floor
    assert row.prov.source.startswith("https://docs.nvidia.com/cuda/")
    exactly = parse_driver(floor)
    assert native_cuda_of(matrix, exactly) == key
    parts = list(exactly.parts)
    parts[-1] -= 1
    just_below = parse_driver(".".join(map(str, parts)))
    assert (native_cuda_of(matrix, just_below) or (0, 0)) < key


@pytest.mark.parametrize(("major", "floor"), sorted(MINOR_COMPAT.items()))
def test_minor_compat_floors(matrix: Matrix, major: int, floor: str) -> None:
    assert format_driver(matrix.minor_compat[major].min_driver) == floor


@pytest.mark.parametrize(("branch", "cuda"), sorted(BRANCH_NATIVE.items()))
def test_bare_branch_runs_its_native_cuda(matrix: Matrix, branch: int, cuda: str) -> None:
    assert matrix.branches[branch].native_cuda == tuple(int(p) for p in cuda.split("."))
    native = native_cuda_of(matrix, parse_driver(str(branch)))
    assert native == tuple(int(p) for p in cuda.split("."))


def test_r565_reports_12_7_but_runs_the_12_6_toolkit(matrix: Matrix) -> None:
    assert matrix.branches[565].native_cuda == (12, 7)
    assert native_cuda_of(matrix, parse_driver("565")) == (12, 6)


@pytest.mark.parametrize(("name", "cc"), sorted(GPU_CC.items()))
def test_gpu_capabilities(matrix: Matrix, name: str, cc: tuple[int, int]) -> None:
    assert build_query(matrix, driver="550", gpus=[name]).gpus[0].cc == cc


def test_gpu_coverage_of_the_matrix_is_broad(matrix: Matrix) -> None:
    assert len(matrix.gpus) >= 20
    for alias in ("H100", "h100 sxm", "RTX 4090", "L4", "sm_89", "8.9"):
        build_query(matrix, driver="550", gpus=[alias])


def test_framework_release_coverage(matrix: Matrix) -> None:
    versions = {fw.name: {r.version for r in fw.releases} for fw in matrix.frameworks}
    assert {"1.13.0", "2.5.1", "2.15.0"} <= versions["torch"]
    assert {"2.10.0", "2.16.2", "2.21.0"} <= versions["tensorflow"]
    assert {"0.4.17", "0.4.30", "0.7.2"} <= versions["jax"]
    assert any(v.startswith("0.12") for v in versions["jax"])


def test_cudnn_tag_naming_change(matrix: Matrix) -> None:
    tags = {".".join(map(str, image.cuda)): image.cudnn_tag for image in matrix.images}
    assert tags["12.2.2"] == "cudnn8"
    assert tags["12.3.2"] == "cudnn9"
    assert tags["12.4.1"] == "cudnn"


# The archs compiled into the official Linux x86_64 TensorFlow wheels on PyPI, read from each
# wheel's tensorflow/python/platform/build_info.py ("cuda_compute_capabilities", written at build
# time from the release build's TF_CUDA_COMPUTE_CAPABILITIES) and matched against the SASS and PTX
# entries of the fatbins in its shared objects. nvcc notation: sm_XY is SASS, compute_XY PTX only.
# 2.16-2.21 were then measured with `envbuild matrix refresh --audit` (issue 16): every fatbin of
# libtensorflow_cc.so.2 and _pywrap_tensorflow_internal.so carries sm_90 SASS next to the compute_90
# PTX (274 of 274 in 2.17.1), which build_info's "compute_90" does not say; the artifact wins.
TF_WHEEL_ARCHS = {
    "2.10.0": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.10.1": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.11.0": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.11.1": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.12.0": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.12.1": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.13.0": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.13.1": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.14.0": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.14.1": "sm_35,sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.15.0": "sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.15.0.post1": "sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.15.1": "sm_50,sm_60,sm_70,sm_75,compute_80",
    "2.16.1": "sm_50,sm_60,sm_70,sm_80,sm_90,compute_90",
    "2.16.2": "sm_50,sm_60,sm_70,sm_80,sm_90,compute_90",
    "2.17.0": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.17.1": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.18.0": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.18.1": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.19.0": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.19.1": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.20.0": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
    "2.21.0": "sm_60,sm_70,sm_80,sm_89,sm_90,compute_90",
}


def _tf_variant(matrix: Matrix, version: str) -> Variant:
    framework = matrix.framework("tensorflow")
    assert framework is not None
    (release,) = [r for r in framework.releases if r.version == version]
    (variant,) = release.variants
    return variant


@pytest.mark.parametrize(("version", "archs"), sorted(TF_WHEEL_ARCHS.items()))
def test_tensorflow_arch_list_is_what_the_wheel_carries(matrix: Matrix, version: str, archs: str) -> None:
    variant, wheel = _tf_variant(matrix, version), parse_arch_list(archs)
    assert (variant.arch.sass, variant.arch.ptx) == (wheel.sass, wheel.ptx)
    assert variant.prov.confidence is None


def test_a100_runs_tensorflow_2_16_from_sass_not_ptx(matrix: Matrix) -> None:
    """The 2.16 wheels carry sm_80 (and sm_90) cubins: no PTX JIT caveat, and minor compatibility may
    run them."""

    def tf_2_16(driver: str, gpu: str, compat: str = "native") -> list:
        frameworks = ["tensorflow==2.16.*"]
        query = build_query(matrix, driver=driver, gpus=[gpu], frameworks=frameworks, compat=compat)
        return list(resolve(matrix, query).stacks)

    native = tf_2_16("550", "A100")
    assert [s.release.version for s in native] == ["2.16.2", "2.16.1"]
    assert not any("PTX" in c for s in native for c in s.caveats)
    minor = tf_2_16("525.60.13", "A100", compat="minor")
    assert [(s.release.version, s.mode) for s in minor] == [("2.16.2", "minor"), ("2.16.1", "minor")]
    # issue 16: the audit found sm_90 SASS in the 2.16 wheels, so H100 runs cubins too, not PTX JIT
    h100 = tf_2_16("550", "H100")
    assert h100 and not any("PTX" in c for s in h100 for c in s.caveats)


# The PyPI torch wheels (each the build named by pypi_variant), read first-hand: METADATA's
# nvidia-cudnn-cu1X / nvidia-nccl-cu1X pins and the cubins in torch/lib/libtorch_cuda.so (its
# -gencode flags are arch=compute_XY,code=sm_XY only, so no PTX). RELEASE.md's "12.0+PTX" is not what ships:
# the release builds drop the PTX (pytorch#175567, "[release-only] Remove +ptx from cuda 13.0 builds").
TORCH_PYPI_WHEELS = {
    "2.6.0": ("cu124", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "9.1.0.70", "2.21.5"),
    "2.7.0": ("cu126", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "9.5.1.17", "2.26.2"),
    "2.7.1": ("cu126", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "9.5.1.17", "2.26.2"),
    "2.8.0": ("cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "9.10.2.21", "2.27.3"),
    "2.9.0": ("cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "9.10.2.21", "2.27.5"),
    "2.9.1": ("cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "9.10.2.21", "2.27.5"),
    "2.10.0": ("cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "9.10.2.21", "2.27.5"),
    "2.11.0": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.19.0.56", "2.28.9"),
    "2.12.0": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.20.0.48", "2.29.7"),
    "2.12.1": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.20.0.48", "2.29.7"),
    "2.13.0": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.20.0.48", "2.29.7"),
    "2.14.0": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.24.0.43", "2.30.7"),
    "2.14.1": ("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", "9.24.0.43", "2.30.7"),
}


@pytest.mark.parametrize(("version", "wheel"), sorted(TORCH_PYPI_WHEELS.items()))
def test_torch_pypi_build_is_what_the_wheel_carries(
    matrix: Matrix, version: str, wheel: tuple[str, str, str, str]
) -> None:
    name, archs, cudnn, nccl = wheel
    framework = matrix.framework("torch")
    assert framework is not None
    (release,) = [r for r in framework.releases if r.version == version]
    assert release.pypi_variant == name
    (variant,) = [v for v in release.variants if v.name == name]
    arch = parse_arch_list(archs)
    assert (variant.arch.sass, variant.arch.ptx) == (arch.sass, arch.ptx)
    assert (variant.cudnn, variant.nccl) == (cudnn, nccl)
    assert variant.prov.confidence is None


def test_torch_2_15_offers_only_its_confirmed_pypi_build(matrix: Matrix) -> None:
    """Only cu132 of 2.15.0 has a source (PyPI METADATA).

    A cu130 build beside it is unconfirmed (issue 15 item 7), so R580 still gets 2.14.1+cu130.
    """
    framework = matrix.framework("torch")
    assert framework is not None
    (release,) = [r for r in framework.releases if r.version == "2.15.0"]
    # issue 16: its arch list is now measured from the PyPI wheel (cubins for 7.5-12.0, no PTX)
    assert [(v.name, v.prov.confidence) for v in release.variants] == [("cu132", None)]
    assert re.fullmatch(r"https://files\.pythonhosted\.org/\S+/torch-2\.15\.0-\S+\.whl#sha256=[0-9a-f]{64}",
                        str(release.variants[0].arch_source))  # fmt: skip
    assert release.variants[0].arch.ptx == frozenset()
    best = resolve(matrix, build_query(matrix, driver="580", frameworks=["torch"])).stacks[0]
    assert candidate_label(best.framework, best.release, best.variant) == "torch 2.14.1+cu130"
    (newest,) = resolve(matrix, build_query(matrix, driver="595", frameworks=["torch==2.15.*"])).stacks
    assert not any("unconfirmed" in c for c in newest.caveats)


def test_every_row_cites_a_url(matrix: Matrix) -> None:
    provs = [c.prov for c in matrix.cuda] + [g.prov for g in matrix.gpus]
    provs += [b.prov for b in matrix.branches.values()] + [i.prov for i in matrix.images]
    provs += [v.prov for fw in matrix.frameworks for r in fw.releases for v in r.variants]
    assert provs
    assert all(p.source.startswith(("https://", "http://")) for p in provs)


# Ranking on the real data: (flags) -> the best stack, worked out from the tables above and the
# frameworks' release matrices (pytorch RELEASE.md, tensorflow.org tested configurations).
BEST = [
    ({"driver": "550", "frameworks": ["torch==2.5.*"]}, "torch 2.5.1+cu124", "12.4"),
    ({"driver": "535", "frameworks": ["torch==2.5.*"]}, "torch 2.5.1+cu121", "12.1"),
    ({"driver": "525", "frameworks": ["torch==2.5.*"]}, "torch 2.5.1+cu118", "11.8"),
    ({"driver": "580", "frameworks": ["torch==2.9.*"]}, "torch 2.9.1+cu130", "13.0"),
    ({"driver": "570", "frameworks": ["torch"], "gpus": ["RTX 5090"]}, "torch 2.11.0+cu128", "12.8"),
    ({"driver": "535", "frameworks": ["tensorflow"]}, "tensorflow 2.15.1 [cuda12.2]", "12.2"),
    ({"driver": "550", "frameworks": ["tensorflow"]}, "tensorflow 2.17.1 [cuda12.3]", "12.3"),
    ({"driver": "470", "frameworks": ["torch"], "compat": "minor"}, "torch 2.7.1+cu118", "11.8"),
]


@pytest.mark.parametrize(("flags", "label", "cuda"), BEST)
def test_best_stack_on_real_data(matrix: Matrix, flags: dict, label: str, cuda: str) -> None:
    best = resolve(matrix, build_query(matrix, **flags)).stacks[0]
    assert candidate_label(best.framework, best.release, best.variant) == label
    assert ".".join(map(str, best.cuda)) == cuda


def test_driver_550_default_gives_cuda_12_4_stacks(matrix: Matrix) -> None:
    result = resolve(matrix, build_query(matrix, driver="550"))
    assert [s.framework.name for s in result.stacks] == ["torch", "tensorflow", "jax"]
    assert all(s.cuda <= (12, 4) for s in result.stacks)
    assert any(s.cuda == (12, 4) for s in result.stacks)
    assert all(s.mode == "native" for s in result.stacks)
