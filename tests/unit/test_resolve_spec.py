"""Issue 17 item 12: `envbuild resolve -f envbuild.toml [--target NAME]` explains each target's stack
and rejections, as `resolve` does for flags, and picks what render picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.specs import TWO_TARGETS


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS)
    return path


def test_one_section_per_target(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "resolve", "-f", str(spec))
    assert code == 0, err
    sections = out.split("== target ")[1:]
    assert [s.split(" ", 1)[0] for s in sections] == ["h100", "l4.infer"]
    h100, l4 = sections
    assert "driver 550, framework torch, gpus H100, strategy wheels, os ubuntu22.04, python 3.10" in h100
    assert "driver R550 (PB, EOL 2025-04) runs CUDA <= 12.4 natively; GPUs: H100 (9.0)" in h100
    assert "GPUs: L4 (8.9)" in l4
    for section in sections:
        assert "Compatible stacks" in section and "Rejected (" in section


def test_the_first_stack_is_what_render_picks(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "resolve", "-f", str(spec), "--json")
    assert code == 0
    document = json.loads(out)
    assert document["spec"] == str(spec)
    by_target = {t["target"]: t for t in document["targets"]}
    assert sorted(by_target) == ["h100", "l4.infer"]
    assert by_target["h100"]["query"]["gpus"] == ["H100"]
    assert by_target["h100"]["driver"] == "R550" and by_target["h100"]["rejected"]
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "build")]) == 0
    capsys.readouterr()
    for name, result in by_target.items():
        rendered = json.loads((tmp_path / "build" / name / "stack.json").read_text())
        first = result["stacks"][0]
        assert (first["framework_version"], first["variant"], first["python"]) == (
            rendered["framework_version"],
            rendered["variant"],
            rendered["python"],
        )


def test_target_picks_one_and_an_unknown_target_lists_them(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "resolve", "-f", str(spec), "--target", "l4.infer")
    assert code == 0 and out.count("== target ") == 1 and "== target l4.infer" in out
    code, _, err = run(capsys, "resolve", "-f", str(spec), "--target", "nope")
    assert code == 2 and "--target 'nope'" in err and "use one of: h100, l4.infer" in err


def test_flags_override_the_spec_and_say_so(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "resolve", "-f", str(spec), "--target", "h100", "--driver", "580")
    assert code == 0
    assert "driver 580 (--driver)" in out and "driver R580 (LTSB, EOL 2028-06)" in out


def test_a_target_with_no_stack_exits_3_with_its_rejections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS.replace('name = "l4.infer"', 'name = "old"\ndriver = "470"'))
    code, out, _ = run(capsys, "resolve", "-f", str(path))
    assert code == 3
    old = out.split("== target old")[1]
    assert "Compatible stacks" not in old and "problem: driver R470 does not support L4" in old
    assert 'driver too old ("CUDA driver version is insufficient")' in old


def test_a_bad_value_in_the_spec_names_the_field_not_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS.replace('gpus = ["L4"]', 'gpus = ["L44"]'))
    code, _, err = run(capsys, "resolve", "-f", str(path))
    assert code == 2 and "target 'l4.infer'" in err and "gpus = 'L44'" in err and "--gpu" not in err


def test_resolve_needs_a_driver_or_a_spec(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "resolve")
    assert code == 2 and "--driver" in err and "-f" in err
    code, _, err = run(capsys, "resolve", "--driver", "550", "--target", "h100")
    assert code == 2 and "--target needs -f" in err
