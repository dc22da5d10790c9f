"""The "no kernel image is available" rule, table-driven from NVIDIA's compatibility guide.

A cubin runs on the same major with an equal or higher minor; PTX JITs forward to any newer arch
(native driver only); cubins never cross majors (sm_100 does not run on sm_120).
"""

from __future__ import annotations

import pytest

from envbuild.matrix.arch import parse_arch_list

TORCH_CU124 = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
TORCH_CU128 = "7.5;8.0;8.6;9.0;10.0;12.0"
TORCH_CU130 = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
JAX_0_4_31 = "sm_50,sm_60,sm_70,sm_80,compute_90"


@pytest.mark.parametrize(
    ("arch", "cc", "allow_ptx", "expected"),
    [
        ("8.6", (8, 9), True, "sass"),  # L4 / RTX 4090 run the sm_86 cubins
        (TORCH_CU124, (8, 9), True, "sass"),
        (TORCH_CU124, (9, 0), True, "sass"),
        (TORCH_CU124, (12, 0), True, None),  # RTX 5090 on a cu124 build: no kernel image
        (TORCH_CU124, (10, 0), True, None),
        (TORCH_CU128, (12, 0), True, "sass"),
        (TORCH_CU128, (12, 1), True, "sass"),  # GB10 runs sm_120 cubins
        (TORCH_CU128, (7, 0), True, None),  # V100 below the 7.5 floor
        (TORCH_CU130, (12, 0), False, "sass"),
        ("10.0", (12, 0), True, None),  # cubins never cross majors
        ("8.0;9.0+PTX", (12, 0), True, "ptx"),
        ("8.0;9.0+PTX", (12, 0), False, None),  # minor-version compat cannot JIT
        ("8.0;9.0+PTX", (8, 6), False, "sass"),
        (JAX_0_4_31, (9, 0), True, "ptx"),  # compute_90 alone is PTX, not SASS
        (JAX_0_4_31, (9, 0), False, None),
        (JAX_0_4_31, (8, 9), False, "sass"),
        ("7.5;8.0", (7, 0), True, None),  # a higher minor does not cover a lower one
        ("3.7;5.0", (3, 5), True, None),
    ],
)
def test_coverage(arch: str, cc: tuple[int, int], allow_ptx: bool, expected: str | None) -> None:
    assert parse_arch_list(arch).covers(cc, allow_ptx=allow_ptx) == expected


def test_notations_agree() -> None:
    torch_style = parse_arch_list("8.0;9.0+PTX")
    nvcc_style = parse_arch_list("sm_80,sm_90,compute_90")
    assert (torch_style.sass, torch_style.ptx) == (nvcc_style.sass, nvcc_style.ptx)
    assert torch_style.describe() == "8.0;9.0;9.0+PTX"


@pytest.mark.parametrize("text", ["", "8.x", "sm_", "hopper"])
def test_bad_arch_lists_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_arch_list(text)
