"""verdict.judge: what the CUDA runtime does with a library's SASS and PTX on a GPU, as a table."""

from __future__ import annotations

import pytest

from envbuild.audit.verdict import NATIVE, NO_KERNEL, PTX_ONLY, SAME_MAJOR, judge, split_arch

# the SASS and PTX cuobjdump lists in jax-cuda12-plugin 0.10.2's _linalg.so (tests/fixtures/audit)
JAX_0_10_2 = ("sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120")

CASES = [  # (SASS, PTX, GPU capability, verdict, why)
    (("sm_80",), (), (8, 0), NATIVE, "exact SASS"),
    (JAX_0_10_2, ("compute_120",), (12, 0), NATIVE, "RTX 5090 gets the sm_120 SASS, not PTX JIT"),
    (("sm_90a",), (), (9, 0), NATIVE, "sm_90a is SASS for 9.0 itself"),
    (("sm_100f",), (), (10, 0), NATIVE, "sm_100f on 10.0"),
    (("sm_80", "sm_90"), ("compute_90",), (9, 0), NATIVE, "SASS beats PTX"),
    (("sm_80",), (), (8, 6), SAME_MAJOR, "SASS runs on a later minor of its major"),
    (("sm_80",), (), (8, 9), SAME_MAJOR, "Ada runs Ampere 8.0 SASS"),
    (("sm_80",), ("compute_86",), (8, 6), SAME_MAJOR, "same-major SASS beats PTX"),
    (("sm_100f",), (), (10, 3), SAME_MAJOR, "an f entry runs on its family: 10.x"),
    (("sm_120",), (), (12, 1), SAME_MAJOR, "DGX Spark runs sm_120 SASS"),
    ((), ("compute_80",), (9, 0), PTX_ONLY, "plain PTX JITs on any later GPU"),
    (("sm_80",), ("compute_80",), (12, 0), PTX_ONLY, "SASS of an older major does not run; PTX does"),
    ((), ("compute_90a",), (9, 0), PTX_ONLY, "a-suffixed PTX JITs on its own capability"),
    ((), ("compute_100f",), (10, 3), PTX_ONLY, "f-suffixed PTX JITs within its family"),
    (("sm_90a",), (), (10, 0), NO_KERNEL, "sm_90a SASS runs only on 9.0"),
    (("sm_100a",), (), (10, 3), NO_KERNEL, "an a entry does not run on a later minor"),
    (("sm_100f",), (), (12, 0), NO_KERNEL, "a family ends at its major"),
    (("sm_86",), (), (8, 0), NO_KERNEL, "SASS never runs on an earlier minor"),
    (("sm_80",), (), (9, 0), NO_KERNEL, "SASS never runs on a later major"),
    ((), ("compute_90a",), (10, 0), NO_KERNEL, "suffixed PTX never JITs on a later major"),
    ((), ("compute_100f",), (12, 0), NO_KERNEL, "nor f PTX outside its family"),
    ((), ("compute_100a",), (10, 3), NO_KERNEL, "nor a PTX on another minor"),
    ((), ("compute_120",), (9, 0), NO_KERNEL, "PTX newer than the GPU does not JIT"),
    (JAX_0_10_2, ("compute_120",), (3, 7), NO_KERNEL, "K80 (3.7) in the JAX 0.10.2 plugin"),
    ((), (), (9, 0), NO_KERNEL, "no entries at all"),
]


@pytest.mark.parametrize(("sass", "ptx", "cc", "verdict", "why"), CASES, ids=[c[4] for c in CASES])
def test_judge(
    sass: tuple[str, ...], ptx: tuple[str, ...], cc: tuple[int, int], verdict: str, why: str
) -> None:
    assert judge(sass, ptx, cc) == verdict, why


@pytest.mark.parametrize(
    ("arch", "parts"),
    [
        ("sm_50", ((5, 0), "")),
        ("sm_90a", ((9, 0), "a")),
        ("sm_100f", ((10, 0), "f")),
        ("sm_101", ((10, 1), "")),
        ("compute_120", ((12, 0), "")),
    ],
)
def test_split_arch(arch: str, parts: tuple[tuple[int, int], str]) -> None:
    assert split_arch(arch) == parts


@pytest.mark.parametrize("text", ["sm_5", "sm_90x", "compute", "9.0", "sm_90_a"])
def test_split_arch_refuses_what_is_not_an_arch(text: str) -> None:
    with pytest.raises(ValueError, match="not an architecture"):
        split_arch(text)
