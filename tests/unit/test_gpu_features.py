"""What a GPU row records beyond its capability: segment, a late SKU's first driver, bf16/fp16.

The formats come from NVIDIA's programming guide (compute-capabilities appendix): fp16 arithmetic from
5.3 (with 6.1 at a low rate), bf16 from 8.0. A row may state them; `matrix check` refuses one that
disagrees with its capability, because the smoke step's precision is chosen from them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.matrix.gpufeatures import has_bf16, has_fp16
from envbuild.matrix.load import load_matrix
from envbuild.matrix.support import capability_gpu
from envbuild.resolve.query import build_query
from envbuild.resolve.solver import resolve
from tests.helpers.matrixedit import check, edit

V100 = 'name = "Tesla V100"\n'


H100_SEGMENT = 'name = "H100"'


@pytest.mark.parametrize(
    ("cc", "bf16", "fp16"),
    [
        ((3, 5), False, False),
        ((3, 7), False, False),
        ((5, 0), False, False),
        ((5, 2), False, False),
        ((5, 3), False, True),
        ((6, 0), False, True),
        ((6, 1), False, True),
        ((6, 2), False, True),
        ((7, 0), False, True),
        ((7, 5), False, True),
        ((8, 0), True, True),
        ((8, 6), True, True),
        ((9, 0), True, True),
        ((12, 1), True, True),
    ],
)
def test_formats_follow_the_programming_guide(cc: tuple[int, int], bf16: bool, fp16: bool) -> None:
    assert (has_bf16(cc), has_fp16(cc)) == (bf16, fp16)


def test_every_bundled_row_has_a_segment_and_the_formats_of_its_capability(matrix) -> None:
    for gpu in matrix.gpus:
        assert gpu.segment in ("data-center", "workstation", "geforce", "jetson"), gpu.name
        assert (gpu.segment == "jetson") == gpu.integrated, gpu.name
        assert (gpu.bf16, gpu.fp16) == (has_bf16(gpu.cc), has_fp16(gpu.cc)), gpu.name


@pytest.mark.parametrize(
    ("insert", "expected"),
    [
        ("bf16 = true\n", "Tesla V100: bf16 = true disagrees with compute capability 7.0"),
        ("fp16 = false\n", "Tesla V100: fp16 = false disagrees with compute capability 7.0"),
        ("min_driver_branch = 999\n", "Tesla V100: min_driver_branch 999 is not a known branch"),
    ],
)
def test_matrix_check_refuses_a_row_at_odds_with_its_capability(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path, insert: str, expected: str
) -> None:
    edit(matrix_copy / "gpus.toml", V100, V100 + insert)
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert expected in out, out


def test_matrix_check_wants_a_segment_and_jetson_means_integrated(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path
) -> None:
    gpus = matrix_copy / "gpus.toml"
    text = gpus.read_text()
    start = text.index(V100)
    row = text[start : text.index("[[gpu]]", start)]
    gpus.write_text(text.replace(row, row.replace('segment = "data-center"\n', 'segment = "jetson"\n'), 1))
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert 'Tesla V100: segment "jetson" and integrated = true go together' in out, out
    gpus.write_text(text.replace(row, row.replace('segment = "data-center"\n', ""), 1))
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "Tesla V100: no segment; write one of data-center, workstation, geforce, jetson" in out, out


def test_a_late_sku_is_refused_below_its_own_first_branch(matrix_copy: Path) -> None:
    """A part that shipped after its architecture's first CUDA may need a newer driver than the
    architecture does; the row's floor is checked as the architecture's is."""
    gpus = matrix_copy / "gpus.toml"
    edit(gpus, H100_SEGMENT + "\n", H100_SEGMENT + "\nmin_driver_branch = 560\n")
    matrix = load_matrix(matrix_copy)
    h100 = next(g for g in matrix.gpus if g.name == "H100")
    assert h100.min_driver_branch == 560
    below = resolve(matrix, build_query(matrix, driver="550.54.15", gpus=["H100"]))
    assert below.stacks == ()
    assert any("NVIDIA's release notes name R560 as its first branch" in p for p in below.problems)
    at = resolve(matrix, build_query(matrix, driver="560.35.03", gpus=["H100"]))
    assert at.stacks
    # the capability stands for all its GPUs: the H200 (no late floor) keeps 9.0 open on R550
    stand_in = capability_gpu(matrix, (9, 0))
    assert stand_in is not None and stand_in.min_driver_branch is None
