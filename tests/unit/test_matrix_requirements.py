"""matrix/requirements.toml (issue 23, item 1's loader): the model, the schema and `matrix check`.

The rows record what the wheel METADATA the install uses requires of the CUDA family; the rules that
use them are tested in test_plan_requirements.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet

from envbuild.cli.app import main
from envbuild.matrix.bounds import admits_prefix, contains, exact
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from tests.helpers.minimatrix import requirement_row, write_minimatrix, write_requirements

JAX_PLUGIN_0_10_2 = (
    "https://files.pythonhosted.org/packages/fa/55/627b9ed487e82047c6f7d1dc8174a31df7c350093292a3c664183908faf1/"
    "jax_cuda12_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"
    "#sha256=76bbfece2f6effb4e8908eb8a5fbf1abbc1125de667683ec2ffba51c63dc57af"
)


def test_a_build_reads_its_wheels_requirements(matrix: Matrix) -> None:
    """The issue's wheel: jax-cuda12-plugin 0.10.2 [with-cuda] needs nvcc >= 12.6.85."""
    row = matrix.requirements("jax", "0.10.2", "cuda12")
    assert row is not None
    assert (row.wheel, row.extra, row.source) == ("jax-cuda12-plugin", "with-cuda", JAX_PLUGIN_0_10_2)
    assert row.requires["nvidia-cuda-nvcc-cu12"] == SpecifierSet(">=12.6.85")
    assert row.requires["nvidia-cudnn-cu12"] == SpecifierSet(">=9.8,<10.0")
    assert row.requires["nvidia-cuda-runtime-cu12"] == SpecifierSet(">=12.1.105")
    assert all(name.startswith("nvidia-") for name in row.requires)


def test_every_golden_and_example_build_has_a_row(matrix: Matrix) -> None:
    """The seed rows: the builds the goldens and examples render (torch 2.7.1+cu118 of
    examples/torch-wheels comes from download.pytorch.org, which has no row: not measured)."""
    for build in [
        ("jax", "0.6.2", "cuda12"),
        ("jax", "0.12.0.1", "cuda13"),
        ("torch", "2.5.1", "cu124"),
        ("tensorflow", "2.15.1", "cuda12.2"),
    ]:
        assert matrix.requirements(*build) is not None, build
    assert matrix.requirements("torch", "2.7.1", "cu118") is None
    tf = matrix.requirements("tensorflow", "2.15.1", "cuda12.2")
    assert tf is not None and tf.requires["nvidia-cudnn-cu12"] == SpecifierSet("==8.9.4.25")


def test_a_matrix_without_the_file_has_no_rows(mini: Matrix) -> None:
    assert mini.requirement_rows == {}
    assert mini.requirements("ranged", "0.5.0", "cuda12") is None


def check(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    code = main(["matrix", "check", "--matrix", str(root)])
    out, err = capsys.readouterr()
    return code, out + err


GOOD = {"nvidia-cuda-runtime-cu12": ">=12.1.105", "nvidia-cuda-nvcc-cu12": ">=12.6.85"}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (requirement_row("flax", "0.5.0", "cuda12", GOOD), "framework 'flax' is not in frameworks/*.toml"),
        (requirement_row("ranged", "0.9.9", "cuda12", GOOD), "ranged 0.9.9 is not a release"),
        (requirement_row("ranged", "0.5.0", "cuda11", GOOD), "has no variant 'cuda11' (cuda12)"),
        (
            requirement_row("ranged", "0.5.0", "cuda12", {"nvidia-cudnn-cu12": ">=9.8,<<10"}),
            "expected a PEP 440 specifier",
        ),
        (
            requirement_row("ranged", "0.5.0", "cuda12", {"nvidia_cudnn_cu12": ">=9.8"}),
            "not a canonical package name (write 'nvidia-cudnn-cu12')",
        ),
        (requirement_row("ranged", "0.5.0", "cuda12", {"numpy": ">=2"}), "not a CUDA-family package"),
        (
            requirement_row("ranged", "0.5.0", "cuda12", GOOD).replace('source = "https://example.org', "#"),
            "missing required key 'source'",
        ),
        (
            requirement_row("ranged", "0.5.0", "cuda12", GOOD).replace("#sha256=" + "0" * 64, ""),
            "whose METADATA was read",
        ),
        (requirement_row("ranged", "0.5.0", "cuda12", GOOD) * 2, "keep one row per build"),
        (
            requirement_row("fw", "1.0.1", "cu124", {"nvidia-cuda-runtime-cu12": "==12.6.77"}),
            "installs no CUDA 12.4 runtime",
        ),
        (
            requirement_row("ranged", "0.5.0", "cuda12", GOOD).replace("wheel =", "wheels ="),
            "did you mean 'wheel'",
        ),
    ],
)
def test_matrix_check_refuses_a_bad_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str, expected: str
) -> None:
    root = write_requirements(write_minimatrix(tmp_path / "m"), row)
    code, out = check(capsys, root)
    assert code == 1, out
    assert expected in out
    assert "requirements.toml" in out
    assert "Traceback" not in out and "internal error" not in out


def test_matrix_check_passes_a_good_row(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = write_requirements(
        write_minimatrix(tmp_path / "m"), requirement_row("ranged", "0.5.0", "cuda12", GOOD)
    )
    code, out = check(capsys, root)
    assert code == 0, out
    row = load_matrix(root).requirements("ranged", "0.5.0", "cuda12")
    assert row is not None and row.bounds == GOOD


# envbuild.matrix.bounds answers without importing packaging; packaging is the oracle
_release = st.lists(st.integers(0, 4), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))


def _clause(op: str, version: str, star: bool) -> str:
    if op == "~=" and "." not in version:
        version += ".0"
    return f"{op}{version}" + (".*" if star and op in ("==", "!=") else "")


_specifier = st.lists(
    st.builds(_clause, st.sampled_from([">=", ">", "<", "<=", "==", "!=", "~="]), _release, st.booleans()),
    max_size=3,
).map(",".join)


@settings(max_examples=600, deadline=None)
@given(_specifier, _release)
def test_contains_agrees_with_packaging(specifier: str, version: str) -> None:
    assert contains(specifier, version) == SpecifierSet(specifier).contains(version, prereleases=True)


@settings(max_examples=600, deadline=None)
@given(_specifier, st.lists(st.integers(0, 4), min_size=1, max_size=2).map(tuple))
def test_admits_prefix_agrees_with_the_releases_packaging_admits(
    specifier: str, prefix: tuple[int, ...]
) -> None:
    """Some release X.Y.* satisfies the specifier exactly when admits_prefix says so. The releases
    tried are every one under the prefix up to one component longer than the longer of the prefix
    and the specifier's longest version (`>0.4.4.1,==0.4.4.1.*` is met first by 0.4.4.1.1, `>0`
    under 0.0 by 0.0.1), with components 0-5: the specifier's are 0-4, so any larger component
    compares as 5 does."""
    import itertools

    from packaging.version import Version

    parsed = SpecifierSet(specifier)
    longest = max((len(clause.version.removesuffix(".*").split(".")) for clause in parsed), default=1)
    found = any(
        parsed.contains(Version(".".join(map(str, prefix + tail))), prereleases=True)
        for depth in range(max(longest, len(prefix)) + 2 - len(prefix))
        for tail in itertools.product(range(6), repeat=depth)
    )
    assert admits_prefix(specifier, prefix) == found


def test_the_issues_bounds() -> None:
    assert not admits_prefix(">=12.6.85", (12, 4))  # nvcc under the 12.4 pin: nothing installs
    assert admits_prefix(">=12.6.85", (12, 6)) and admits_prefix(">=12.6.85", (12, 9))
    assert not contains("<10.0,>=9.8", "9.1.0.70")  # nvidia/cuda 12.4.1's cuDNN for jax 0.6.2
    assert contains("<10.0,>=9.8", "9.8.0.87")
    assert exact("==9.1.0.70") == "9.1.0.70" and exact(">=9.8,<10.0") is None
