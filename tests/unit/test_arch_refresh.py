"""Issue 16, items 4 and 5: a row's arch list against the kernels measured in its wheel, the edit
`matrix refresh --audit --write` makes, and what resolve says about a measured row.

The comparison cases are the issue's own: jax-cuda12-plugin 0.10.2 lists SASS sm_50 ... sm_120 and
PTX compute_120 where its row said sm_50,...,sm_100,compute_120.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from envbuild.errors import UsageError
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import load_matrix
from envbuild.refresh.arch_audit import kernel_package
from envbuild.refresh.edit import apply_edit
from envbuild.refresh.kernel_facts import compare, measure
from envbuild.refresh.model import Edit
from envbuild.refresh.run import parse_audit
from envbuild.resolve.query import build_query
from envbuild.resolve.report import stack_json
from envbuild.resolve.solver import resolve
from tests.helpers.minimatrix import write_minimatrix


def lib(*arches: str, n: int = 3, **special: int) -> Counter[str]:
    """A library's fatbin entry counts: `n` of each listed arch, and a few special ones."""
    return Counter({**dict.fromkeys(arches, n), **special})


JAX_0102 = {
    "jax_cuda12_plugin/_linalg.so": lib(
        "sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120", "compute_120"
    )
}
WHEEL = "https://files.example.org/fw-1.0.1-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=" + "ab" * 32
TORCH_28 = {  # torch 2.8.0's PyPI wheel: 393 cubins per listed arch, one sm_89 kernel, linalg on its own list
    "torch/lib/libtorch_cuda.so": lib(
        "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", n=393, sm_89=1, sm_90a=4
    ),
    "torch/lib/libtorch_cuda_linalg.so": lib(
        "sm_50", "sm_60", "sm_70", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", n=107
    ),
}

# (row arch, entry counts per library) -> (confirmed, proposed arch, differences)
CASES = [
    pytest.param(
        "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,compute_120",
        JAX_0102,
        False,
        "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,sm_101,sm_120,compute_120",
        ("SASS sm_101 in the wheel, not in the row", "SASS sm_120 in the wheel, not in the row"),
        id="issue-16-jax-0.10.2",
    ),
    pytest.param(
        "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,sm_101,sm_120,compute_120",
        JAX_0102,
        True,
        "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,sm_101,sm_120,compute_120",
        (),
        id="confirmed",
    ),
    pytest.param(
        "7.0;7.5;8.0;8.6;9.0;10.0;12.0",  # the core library's list; sm_89 and linalg's 5.0/6.0 are not
        TORCH_28,
        True,
        "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
        (),
        id="torch-2.8-core-library-main-set",
    ),
    pytest.param(
        "7.5;8.0;12.0+PTX",
        {"torch/lib/libtorch_cuda.so": lib("sm_75", "sm_80", "sm_120")},
        False,
        "7.5;8.0;12.0",
        ("PTX compute_120 in the row, not in the wheel",),
        id="torch-cu130-no-ptx",
    ),
    pytest.param(
        "8.0;9.0",  # PTX without SASS of its capability cannot be said in torch notation
        {"a.so": lib("sm_80", "compute_90")},
        False,
        "sm_80,compute_90",
        ("SASS sm_90 in the row, not in the wheel", "PTX compute_90 in the wheel, not in the row"),
        id="ptx-only-falls-back-to-nvcc",
    ),
    pytest.param(
        "sm_90,compute_100",  # an f (family) entry is plain SASS of its capability
        {"a.so": lib("sm_90", "sm_100f", "compute_100")},
        False,
        "sm_90,sm_100,compute_100",
        ("SASS sm_100 in the wheel, not in the row",),
        id="family-suffix",
    ),
]


@pytest.mark.parametrize(("row", "libraries", "confirmed", "proposed", "differences"), CASES)
def test_compare(
    row: str, libraries: dict[str, Counter[str]], confirmed: bool, proposed: str, differences: tuple[str, ...]
) -> None:
    result = compare(row, measure(libraries))
    assert (result.confirmed, result.proposed, result.differences) == (confirmed, proposed, differences)


def test_what_lies_outside_the_build_list_is_kept_for_the_note() -> None:
    measured = measure(TORCH_28)
    assert measured.specific == ("sm_90a",)
    assert measured.extra == (
        "libtorch_cuda_linalg.so is built for sm_50,sm_60,sm_70,sm_80,sm_86,sm_90,sm_100,sm_120",
        "sm_89 (1 of 393 in libtorch_cuda.so)",
    )


FW_ROW = """[[release]]
versions = ["1.0.0", "1.0.1"]
python = ["3.11"]

  [[release.variant]]
  name = "cu124"
  arch = "8.0;9.0+PTX"
  confidence = "unconfirmed"
  note = "arch list assumed"
  source = "https://example.org/primary"

[[release]]
versions = ["0.9.0"]

  [[release.variant]]
  name = "cu124"
  arch = "8.0"
  source = "https://example.org/primary"
"""


def test_set_variant_edit_sets_adds_and_drops_keys_of_that_variant_only() -> None:
    edit = Edit(
        kind="set-variant",
        anchor="1.0.0 cu124",
        text=f'arch = "8.0;9.0;12.0+PTX"\narch_source = "{WHEEL}"\n-confidence\nnote = "measured"',
    )
    text = apply_edit(FW_ROW, edit, "frameworks/fw.toml")
    assert text == FW_ROW.replace(
        '  arch = "8.0;9.0+PTX"\n  confidence = "unconfirmed"\n  note = "arch list assumed"\n',
        f'  arch = "8.0;9.0;12.0+PTX"\n  note = "measured"\n  arch_source = "{WHEEL}"\n',
    )
    assert text.endswith('versions = ["0.9.0"]\n\n  [[release.variant]]\n  name = "cu124"\n  arch = "8.0"\n'
                         '  source = "https://example.org/primary"\n')  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "row", "variant", "project"),
    [
        ("jax", {}, {"name": "cuda12", "index_url": "https://pypi.org/simple", "extra": "cuda12"},
         "jax-cuda12-plugin"),
        ("jax", {}, {"name": "cuda12", "index_url": "https://storage.googleapis.com/jax-releases/x.html",
                     "extra": "cuda12_pip"}, None),
        ("tensorflow", {}, {"name": "cuda12.5", "index_url": "https://pypi.org/simple"}, "tensorflow"),
        ("torch", {"pypi_variant": "cu126"}, {"name": "cu126", "index_url": "https://download.pytorch.org/whl/cu126"},
         "torch"),
        ("torch", {"pypi_variant": "cu126"}, {"name": "cu118", "index_url": "https://download.pytorch.org/whl/cu118"},
         None),
    ],
)  # fmt: skip
def test_which_wheel_holds_a_variants_kernels(
    framework: str, row: dict, variant: dict, project: str | None
) -> None:
    assert kernel_package(framework, framework, row, variant) == project


def test_audit_flag_values() -> None:
    assert parse_audit(None) == ()
    assert parse_audit("all") == ("jax", "tensorflow", "torch")
    assert parse_audit("jax, tensorflow") == ("jax", "tensorflow")
    with pytest.raises(UsageError, match="--audit 'pytorch': unknown framework pytorch"):
        parse_audit("pytorch")


def _measured_mini(tmp_path: Path, *, keep_confidence: bool) -> Path:
    root = write_minimatrix(tmp_path / "mini")
    fw = root / "frameworks" / "fw.toml"
    replacement = f'arch_source = "{WHEEL}"'
    if keep_confidence:
        replacement = f'confidence = "unconfirmed"\n  {replacement}'
    fw.write_text(fw.read_text().replace('confidence = "unconfirmed"', replacement, 1))
    return root


def test_resolve_json_carries_arch_source_and_no_arch_caveat(tmp_path: Path) -> None:
    before = load_matrix(write_minimatrix(tmp_path / "before"))
    matrix = load_matrix(_measured_mini(tmp_path, keep_confidence=False))
    assert check_matrix(matrix) == []
    for current, source, caveats in (
        (
            before,
            None,
            ["frameworks/fw.toml [[release]] 1.0.1 variant cu124 is unconfirmed: arch list assumed"],
        ),
        (matrix, WHEEL, []),
    ):
        result = resolve(current, build_query(current, driver="550", frameworks=["fw"], limit=10))
        stack = next(s for s in result.stacks if s.variant.name == "cu124" and s.release.version == "1.0.1")
        document = json.loads(json.dumps(stack_json(stack)))
        assert document["arch_source"] == source
        assert document["caveats"] == caveats
    other = next(s for s in result.stacks if s.variant.name == "cu118")
    assert stack_json(other)["arch_source"] is None


def test_matrix_check_rejects_arch_source_next_to_confidence(tmp_path: Path) -> None:
    problems = check_matrix(load_matrix(_measured_mini(tmp_path, keep_confidence=True)))
    assert problems == [
        "frameworks/fw.toml [[release]] 1.0.0 variant cu124: arch_source says the arch list was measured "
        "from the wheel, but the row is still marked confidence = 'unconfirmed'; drop confidence (say any "
        "other doubt in note)"
    ]


def test_matrix_schema_rejects_an_arch_source_without_a_sha256(tmp_path: Path) -> None:
    from envbuild.errors import MatrixError

    root = write_minimatrix(tmp_path / "mini")
    fw = root / "frameworks" / "fw.toml"
    fw.write_text(
        fw.read_text().replace('confidence = "unconfirmed"', 'arch_source = "https://x.org/a.whl"', 1)
    )
    with pytest.raises(MatrixError, match=r"arch_source.*expected the audited wheel as"):
        load_matrix(root)
