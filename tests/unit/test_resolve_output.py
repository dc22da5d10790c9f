"""Issue 15's smaller resolve errors, each with the issue's own input: what `envbuild resolve` prints
and returns for the minor-compat hint, caveats, the R620 header, repeated --framework filters and
empty flag values. Bundled-matrix tests pin the issue's examples; mini-matrix tests pin the rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from envbuild.resolve.query import build_query
from envbuild.resolve.report import to_json, to_text
from envbuild.resolve.solver import candidate_label
from tests.helpers.minimatrix import labels, run, write_minimatrix

MINOR_CAVEAT = "PTX JIT of newer code fails and CUDA APIs newer than the driver are unavailable"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- 5. a hint when native is old --------------------------------------------------------------


def test_r550_text_says_in_one_line_what_minor_compat_would_give(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550")
    assert code == 0
    assert "  1  torch 2.7.1 " in out
    hint = f"With --compat minor: torch 2.14.1+cu126 (CUDA 12.6) instead of torch 2.7.1+cu118; {MINOR_CAVEAT}"
    assert hint in out.splitlines()
    tf_hint = [line for line in out.splitlines() if line.startswith("With --compat minor: tensorflow ")]
    assert tf_hint == [
        "With --compat minor: tensorflow 2.21.0 [cuda12.5] (CUDA 12.5) instead of tensorflow 2.17.1 "
        f"[cuda12.3]; {MINOR_CAVEAT}"
    ]
    assert "With --compat minor: jax" not in out  # jax's native answer is already its newest


def test_r550_json_carries_the_minor_compat_answer_per_framework(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["with_minor_compat"]["torch"] == {
        "candidate": "torch 2.14.1+cu126",
        "framework_version": "2.14.1",
        "variant": "cu126",
        "cuda": "12.6",
        "min_driver": "525.60.13",
        "instead_of": "torch 2.7.1+cu118",
        "caveat": "runs CUDA 12.6 on driver R550 through minor-version compatibility: " + MINOR_CAVEAT,
    }
    assert set(document["with_minor_compat"]) == {"torch", "tensorflow"}


def test_no_hint_when_already_minor_or_when_minor_adds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--compat", "minor", "--json")
    assert json.loads(out)["with_minor_compat"] == {}
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--compat", "minor")
    assert "With --compat minor:" not in out
    _, out, _ = run_cli(capsys, "resolve", "--driver", "620", "--json")
    assert json.loads(out)["with_minor_compat"] == {}


def test_hint_is_the_best_stack_the_same_query_gets_under_minor_compat(mini: Matrix) -> None:
    """525.60.13 natively runs 12.0 at most: fw 1.0.1 cu118; minor compat gives fw 2.0.0 cu126."""
    native = run(mini, driver="525.60.13", frameworks=["fw"])
    assert labels(native) == ["fw 1.0.1 [cu118]", "fw 1.0.0 [cu118]"]
    hint = native.with_minor_compat["fw"]
    assert candidate_label(hint.framework, hint.release, hint.variant) == "fw 2.0.0 [cu126]"
    assert (hint.mode, hint.cuda) == ("minor", (12, 6))
    minor = run(mini, driver="525.60.13", frameworks=["fw"], compat="minor")
    assert minor.stacks[0] == hint
    # the query's other constraints apply to the hint too: no Python 3.10 wheels of fw 2.0.0
    assert run(mini, driver="525.60.13", frameworks=["fw"], python="3.10").with_minor_compat == {}


# --- 6. caveats under their stack, numbered once -------------------------------------------------


def _caveat_block(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("Caveats:")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1 : end]


def test_r550_minor_caveats_are_listed_under_their_stack(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--compat", "minor")
    block = _caveat_block(out)
    numbered = [line for line in block if re.match(r"^  \d+\. ", line)]
    # jax 0.12.0.1's arch list was measured from its wheel (issue 16, arch_source): no caveat of the
    # jax.toml row; its only caveat is the ptxas its plugin needs above CUDA 12.4 (issue 23)
    assert numbered == [
        "  1. torch 2.14.1+cu126:",
        "  2. tensorflow 2.21.0 [cuda12.5]:",
        "  3. jax 0.12.0.1 [cuda12]:",
    ]
    jax = block[block.index(numbered[2]) + 1 :]
    assert len(jax) == 1 and jax[0].startswith(
        "     - jax-cuda12-plugin 0.12.0.1 [with-cuda] requires nvidia-cuda-nvcc-cu12>=12.6.85:"
    )
    tf = block[block.index(numbered[1]) + 1 : block.index(numbered[2])]
    assert tf == [  # its arch list is confirmed from the wheel: only the minor-compat caveat is left
        "     - runs CUDA 12.5 on driver R550 through minor-version compatibility: " + MINOR_CAVEAT,
    ]
    assert "jax.toml" not in out


def test_caveat_names_the_stacks_own_release(capsys: pytest.CaptureFixture[str]) -> None:
    """torch 2.7.1 shares its row (versions 2.7.0, 2.7.1) with 2.7.0: its caveat names 2.7.1."""
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--json")
    assert code == 0
    torch = json.loads(out)["stacks"][0]
    assert (torch["framework_version"], torch["variant"]) == ("2.7.1", "cu118")
    assert torch["caveats"][0].startswith(
        "frameworks/torch.toml [[release]] 2.7.1 variant cu118 is unconfirmed:"
    )
    assert not any("2.7.0" in caveat for caveat in torch["caveats"])
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550")
    assert "[[release]] 2.7.0" not in out
    assert "     - frameworks/torch.toml [[release]] 2.7.1 variant cu118 is unconfirmed: " in out


def test_caveat_of_a_multi_version_row_names_each_release(mini: Matrix) -> None:
    result = run(mini, driver="550", frameworks=["fw"], limit=10)
    by_version = {s.release.version: s for s in result.stacks if s.variant.name == "cu124"}
    assert set(by_version) == {"1.0.0", "1.0.1"}
    for version, stack in by_version.items():
        assert stack.caveats == (
            f"frameworks/fw.toml [[release]] {version} variant cu124 is unconfirmed: arch list assumed",
        )


# --- 6. the header agrees with the branch row ----------------------------------------------------


def test_r620_header_says_what_the_branch_row_says_and_what_stacks_are_judged_by(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "620")
    assert code == 0
    assert out.splitlines()[0] == (
        "driver R620 (LTSB, EOL 2029-09) runs CUDA <= 13.5 natively; stacks are resolved for "
        "CUDA <= 13.3, the newest with a confirmed minimum driver (none recorded for 13.4, 13.5)"
    )
    _, out, _ = run_cli(capsys, "resolve", "--driver", "620", "--json")
    document = json.loads(out)
    assert document["native_cuda"] == document["branch"]["native_cuda"] == "13.5"
    assert document["native_cuda_without_floor"] == ["13.4", "13.5"]
    assert max(tuple(map(int, s["cuda"].split("."))) for s in document["stacks"]) <= (13, 3)


def test_header_unchanged_where_every_native_minor_has_a_floor(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550")
    assert out.splitlines()[0] == "driver R550 (PB, EOL 2025-04) runs CUDA <= 12.4 natively"
    _, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--json")
    assert json.loads(out)["native_cuda_without_floor"] == []


def test_header_rule_on_a_branch_newer_than_the_known_floors(tmp_path: Path) -> None:
    """A GA row without a minimum driver, and a branch row that runs it: named, never resolved."""
    root = write_minimatrix(tmp_path / "m")
    with (root / "drivers.toml").open("a") as handle:
        handle.write(
            '\n[[cuda]]\nversion = "13.1.0"\nlabel = "CUDA 13.1 GA"\nga = true\n'
            'confidence = "unconfirmed"\nsource = "https://example.org/primary"\n'
            '\n[[branch]]\nbranch = 590\nnative_cuda = "13.1"\ntype = "NFB"\n'
            'source = "https://example.org/primary"\n'
        )
    matrix = load_matrix(root)
    result = run(matrix, driver="590", frameworks=["ranged"], compat="native")
    text = to_text(result, matrix)
    assert text.splitlines()[0] == (
        "driver R590 (NFB) runs CUDA <= 13.1 natively; stacks are resolved for CUDA <= 13.0, "
        "the newest with a confirmed minimum driver (none recorded for 13.1)"
    )
    assert json.loads(to_json(result, matrix))["native_cuda_without_floor"] == ["13.1"]
    # a full version below a known floor does not get the branch's claim (the mini matrix has 12.8 at R570)
    early = run(matrix, driver="580.10.01", frameworks=["fw"])
    assert to_text(early, matrix).startswith("driver 580.10.01 (R580, LTSB) runs CUDA <= 12.8 natively\n")


# --- 6. repeated --framework filters are OR'ed ----------------------------------------------------


def test_two_framework_filters_on_one_framework_are_ored(capsys: pytest.CaptureFixture[str]) -> None:
    two = ["--framework", "torch==2.5.*", "--framework", "torch==2.6.*"]
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550", *two, "--json")
    assert code == 0
    versions = {s["framework_version"] for s in json.loads(out)["stacks"]}
    assert versions and {v.rsplit(".", 1)[0] for v in versions} <= {"2.5", "2.6"}
    assert "2.6.0" in versions
    reasons = {r["candidate"]: r["reason"] for r in json.loads(out)["rejected"]}
    assert reasons["torch 2.7.1+cu118"] == "excluded by --framework 'torch==2.5.*' or 'torch==2.6.*'"


def test_repeated_filters_or_and_a_bare_name_allows_every_release(mini: Matrix) -> None:
    either = run(mini, driver="580", frameworks=["fw==2.0.0", "framework==1.0.0"], limit=10)
    assert labels(either) == ["fw 2.0.0 [cu130]", "fw 2.0.0 [cu126]", "fw 1.0.0 [cu124]", "fw 1.0.0 [cu118]"]
    assert len(build_query(mini, driver="580", frameworks=["fw", "fw<2"]).frameworks) == 1
    assert labels(run(mini, driver="580", frameworks=["fw", "fw<2"], limit=1)) == ["fw 2.0.0 [cu130]"]
    one_filter_ands = run(mini, driver="580", frameworks=["fw>=1.0.1,<2"], limit=10)
    assert labels(one_filter_ands) == ["fw 1.0.1 [cu124]", "fw 1.0.1 [cu118]"]


# --- 6. empty flag values are refused ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--cuda", ""], "--cuda"),
        (["--cuda", "  "], "--cuda"),
        (["--python", ""], "--python"),
        (["--framework", ""], "--framework"),
        (["--framework", " "], "--framework"),
        (["--os", ""], "--os"),
        (["--gpu", " "], "--gpu"),
    ],
)
def test_empty_flag_value_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], args: list[str], flag: str
) -> None:
    code, out, err = run_cli(capsys, "resolve", "--driver", "550", *args)
    assert code == 2
    assert out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"error: {flag} {args[1]!r} is empty")
    assert "fix: " in err and "Traceback" not in err


def test_empty_cuda_is_a_usage_error_in_build_query(mini: Matrix) -> None:
    with pytest.raises(UsageError) as info:
        build_query(mini, driver="550", cuda="")
    assert info.value.message == "--cuda '' is empty"
    assert "12.4" in (info.value.fix or "")
