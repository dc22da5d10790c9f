"""The resolution rules, on a small matrix whose answers are worked out by hand (tests/minimatrix.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import UsageError
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from envbuild.resolve.query import build_query
from envbuild.resolve.solver import Resolution, candidate_label, resolve
from tests.helpers.minimatrix import labels, run, write_minimatrix


def reasons(resolution: Resolution) -> dict[str, str]:
    return {candidate_label(r.framework, r.release, r.variant): r.reason.text for r in resolution.rejected}


def test_native_floor_is_the_ga_release_minimum(mini: Matrix) -> None:
    at_floor = run(mini, driver="550.54.14", frameworks=["fw"], limit=10)
    assert labels(at_floor)[0] == "fw 1.0.1 [cu124]"
    below = run(mini, driver="550.54.13", frameworks=["fw"], limit=10)
    assert labels(below)[0] == "fw 1.0.1 [cu118]"
    assert reasons(below)["fw 1.0.1 [cu124]"] == ("needs driver >= 550.54.14 (CUDA 12.4), you have 550.54.13")


def test_bare_branch_is_a_current_driver_of_that_branch(mini: Matrix) -> None:
    stack = run(mini, driver="550", frameworks=["fw"]).stacks[0]
    assert (stack.release.version, stack.variant.name, stack.cuda, stack.mode) == (
        "1.0.1",
        "cu124",
        (12, 4),
        "native",
    )
    assert stack.min_driver == (550, 54, 14)


def test_ranking_newest_release_then_cuda_then_python(mini: Matrix) -> None:
    result = run(mini, driver="R580", frameworks=["fw"], limit=10)
    assert labels(result) == [
        "fw 2.0.0 [cu130]",
        "fw 2.0.0 [cu126]",
        "fw 1.0.1 [cu124]",
        "fw 1.0.1 [cu118]",
        "fw 1.0.0 [cu124]",
        "fw 1.0.0 [cu118]",
    ]
    assert {s.python for s in result.stacks} == {(3, 12), (3, 11)}
    assert result.stacks[0].python == (3, 12)


def test_minor_compat_is_opt_in_and_says_what_it_costs(mini: Matrix) -> None:
    native = run(mini, driver="550", frameworks=["fw"], limit=1)
    assert labels(native) == ["fw 1.0.1 [cu124]"]
    compat = run(mini, driver="550", frameworks=["fw"], compat="minor", limit=1)
    best = compat.stacks[0]
    assert labels(compat) == ["fw 2.0.0 [cu126]"]
    assert (best.mode, best.min_driver) == ("minor", (525, 60, 13))
    assert any("PTX JIT" in c and "minor-version compatibility" in c for c in best.caveats)
    # the 13.x floor is 580.65.06: compat never crosses a major
    assert "fw 2.0.0 [cu130]" in reasons(compat)


def test_gpu_coverage_sass_of_lower_minor_and_ptx(mini: Matrix) -> None:
    l4 = run(mini, driver="550", frameworks=["fw"], gpus=["L4"], limit=10)
    assert "fw 1.0.1 [cu118]" in labels(l4)  # 8.6 SASS covers 8.9
    blackwell = run(mini, driver="570", frameworks=["fw<2"], gpus=["RTX 5090"], limit=10)
    assert labels(blackwell) == ["fw 1.0.1 [cu124]", "fw 1.0.0 [cu124]"]  # only via 9.0+PTX
    assert any("PTX JIT only" in c for c in blackwell.stacks[0].caveats)
    assert reasons(blackwell)["fw 1.0.1 [cu118]"].startswith(
        "no kernel image is available for execution on the device: RTX 5090 (sm_120"
    )


def test_ptx_does_not_count_under_minor_compat(mini: Matrix) -> None:
    # ranged has SASS 8.0 and PTX 9.0: H100 runs it through PTX JIT, which minor compat cannot do
    assert labels(run(mini, driver="550", frameworks=["ranged"], gpus=["sm_90"])) == ["ranged 0.5.0 [cuda12]"]
    result = run(
        mini, driver="530.30.02", frameworks=["fw", "ranged"], gpus=["sm_90"], cuda=">=12.4", compat="minor"
    )
    assert "fw 2.0.0 [cu126]" in labels(result)  # real sm_90 SASS
    why = reasons(result)["ranged 0.5.0 [cuda12]"]
    assert "PTX only" in why and "minor-version compatibility" in why


def test_open_range_takes_newest_native_minor(mini: Matrix) -> None:
    assert run(mini, driver="550", frameworks=["ranged"]).stacks[0].cuda == (12, 4)
    assert run(mini, driver="560.28.03", frameworks=["ranged"]).stacks[0].cuda == (12, 6)
    assert run(mini, driver="550", frameworks=["ranged"], cuda="12.0").stacks[0].cuda == (12, 0)
    too_old = run(mini, driver="520.61.05", frameworks=["ranged"])
    assert reasons(too_old)["ranged 0.5.0 [cuda12]"] == (
        "needs driver >= 525.60.13 (CUDA 12.0+), you have 520.61.05"
    )


def test_open_range_under_compat_takes_lowest_accepted_minor(mini: Matrix) -> None:
    stack = run(mini, driver="550", frameworks=["ranged"], cuda=">=12.6", compat="minor").stacks[0]
    assert (stack.cuda, stack.mode) == ((12, 6), "minor")


def test_filters_python_cuda_and_specifier(mini: Matrix) -> None:
    py = run(mini, driver="580", frameworks=["fw"], python="3.10", limit=10)
    assert labels(py) == ["fw 1.0.1 [cu124]", "fw 1.0.1 [cu118]", "fw 1.0.0 [cu124]", "fw 1.0.0 [cu118]"]
    assert reasons(py)["fw 2.0.0 [cu130]"] == "no wheels for Python 3.10 (has 3.11, 3.12)"
    assert all(s.python == (3, 10) for s in py.stacks)
    cuda = run(mini, driver="580", frameworks=["fw"], cuda="<12", limit=10)
    assert labels(cuda) == ["fw 1.0.1 [cu118]", "fw 1.0.0 [cu118]"]
    spec = run(mini, driver="580", frameworks=["framework==1.0.0"], limit=10)
    assert labels(spec) == ["fw 1.0.0 [cu124]", "fw 1.0.0 [cu118]"]
    assert reasons(spec)["fw 2.0.0 [cu126]"] == "excluded by --framework 'fw==1.0.0'"


def test_without_framework_best_of_each_in_order(mini: Matrix) -> None:
    result = run(mini, driver="580")
    assert labels(result) == ["fw 2.0.0 [cu130]", "ranged 0.5.0 [cuda12]"]
    assert result.more == {"fw": 5}


def test_caveat_for_unconfirmed_row(mini: Matrix) -> None:
    stack = run(mini, driver="550", frameworks=["fw"]).stacks[0]
    assert stack.variant.name == "cu124"
    assert any("unconfirmed" in c and "arch list assumed" in c for c in stack.caveats)
    confirmed = run(mini, driver="580", frameworks=["fw"]).stacks[0]
    assert confirmed.caveats == ()


def test_gpu_beyond_its_last_driver_branch_is_a_problem(mini: Matrix) -> None:
    assert run(mini, driver="470", gpus=["K80"]).problems == ()
    result = run(mini, driver="550", gpus=["K80"])
    assert result.stacks == ()
    assert result.problems == (
        "K80 is supported only up to driver branch R470; driver R550 cannot "
        "drive it (install an R470 driver)",
    )


def test_nothing_found_gives_closest_misses_with_relaxation(mini: Matrix) -> None:
    result = run(mini, driver="525.60.13", frameworks=["fw>=2"])
    assert result.stacks == ()
    relax = {
        candidate_label(r.framework, r.release, r.variant): [f.relax for f in r.failures]
        for r in result.closest
    }
    assert relax["fw 2.0.0 [cu126]"] == ["--compat minor"]
    assert relax["fw 2.0.0 [cu130]"] == ["a driver >= 580.65.06"]


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"driver": "R999"}, "--driver"),
        ({"driver": "550", "gpus": ["H1000"]}, "--gpu"),
        ({"driver": "550", "frameworks": ["fww"]}, "--framework"),
        ({"driver": "550", "frameworks": ["fw 2.0"]}, "--framework"),
        ({"driver": "550", "frameworks": ["fw=>2"]}, "--framework"),
        ({"driver": "550", "python": "3"}, "--python"),
        ({"driver": "550", "cuda": ">>12"}, "--cuda"),
        ({"driver": "550", "compat": "forward"}, "--compat"),
        ({"driver": "550", "limit": 0}, "--limit"),
    ],
)
def test_bad_input_names_the_flag(mini: Matrix, kwargs: dict, flag: str) -> None:
    with pytest.raises(UsageError) as info:
        build_query(mini, **kwargs)
    assert flag in info.value.message
    assert info.value.fix


def test_gpu_lookup_forms(mini: Matrix) -> None:
    for text in ("h100", "H100 SXM", "h100-sxm", "NVIDIA H100 80GB HBM3", "nvidia h100"):
        assert build_query(mini, driver="550", gpus=[text]).gpus[0].name == "H100"
    assert build_query(mini, driver="550", gpus=["GeForce RTX 5090"]).gpus[0].cc == (12, 0)
    with pytest.raises(UsageError) as info:
        build_query(mini, driver="550", gpus=["H10"])
    assert "H100" in (info.value.fix or "")


def test_matrix_path_is_used(tmp_path: Path) -> None:
    root = write_minimatrix(tmp_path / "m")
    assert [fw.name for fw in load_matrix(root).frameworks] == ["fw", "ranged"]


def test_repeated_framework_flags_are_ored(mini: Matrix) -> None:
    query = build_query(mini, driver="580", frameworks=["fw<1.0.1", "framework==2.0.0"])
    assert len(query.frameworks) == 1
    assert labels(resolve(mini, query)) == [
        "fw 2.0.0 [cu130]",
        "fw 2.0.0 [cu126]",
        "fw 1.0.0 [cu124]",
        "fw 1.0.0 [cu118]",
    ]


def test_strategy_filters(mini: Matrix) -> None:
    base = run(mini, driver="580", frameworks=["fw"], strategy="base-image", limit=10)
    assert labels(base) == ["fw 1.0.1 [cu124]", "fw 1.0.0 [cu124]"]  # only 12.4.1 has an image
    assert reasons(base)["fw 2.0.0 [cu130]"] == "no nvidia/cuda cuDNN image for CUDA 13.0 on ubuntu22.04"
    other_os = run(mini, driver="580", frameworks=["fw"], strategy="base-image", os="debian12")
    assert other_os.stacks == ()
    ranged = run(mini, driver="580", frameworks=["ranged"], strategy="base-image")
    assert ranged.stacks[0].cuda == (12, 4)  # the newest minor that has an image
    assert run(mini, driver="580", frameworks=["fw"], strategy="wheels").stacks
