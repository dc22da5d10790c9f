"""Issue 17 item 9: `envbuild init` starts from a driver branch that is still supported, reads the
driver and GPUs from nvidia-smi when there is one (and says so), and refuses a missing folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.matrix.load import default_matrix_dir
from envbuild.spec.model import load_spec


@pytest.fixture
def no_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with no nvidia-smi on it, whatever host runs the tests."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_without_nvidia_smi_the_default_is_the_current_lts_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, no_smi: None
) -> None:
    monkeypatch.setenv("ENVBUILD_TODAY", "2026-11-30")
    spec = tmp_path / "envbuild.toml"
    code, out, err = init(capsys, "-f", str(spec))
    assert code == 0, err
    stack = load_spec(str(spec)).targets[0].stack
    assert stack.driver == "620" and stack.gpus == ()  # R620 (LTSB, EOL 2029-09); R550 ended 2025-04
    assert "no nvidia-smi" in out and "R620 (LTSB, supported until 2029-09)" in out
    # and it renders as written
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "build")]) == 0


def test_the_default_follows_the_matrix_lifecycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, no_smi: None
) -> None:
    """Derived, not hard-coded: with R620's end moved before today, the current LTS is R580."""
    matrix = tmp_path / "matrix"
    shutil.copytree(default_matrix_dir(), matrix)
    drivers = matrix / "drivers.toml"
    drivers.write_text(drivers.read_text().replace('eol = "2029-09"', 'eol = "2026-10"', 1))
    monkeypatch.setenv("ENVBUILD_TODAY", "2026-11-30")
    spec = tmp_path / "envbuild.toml"
    assert init(capsys, "-f", str(spec), "--matrix", str(matrix))[0] == 0
    assert load_spec(str(spec)).targets[0].stack.driver == "580"


def test_driver_and_gpus_come_from_nvidia_smi_and_it_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_smi
) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    spec = tmp_path / "envbuild.toml"
    code, out, err = init(capsys, "-f", str(spec))
    assert code == 0, err
    stack = load_spec(str(spec)).targets[0].stack
    assert (stack.driver, stack.gpus) == ("550.127.05", ("H100",))
    assert "driver 550.127.05 and GPU H100 read from nvidia-smi" in out
    assert "R550 reached end of life" in out  # the host's branch is old: said, not hidden


def test_flags_beat_nvidia_smi(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_smi) -> None:
    fake_smi("banner_535_a100_4gpu_processes.txt")
    spec = tmp_path / "envbuild.toml"
    code, out, _ = init(capsys, "-f", str(spec), "--driver", "580", "--gpu", "L4", "--gpu", "H100")
    assert code == 0
    stack = load_spec(str(spec)).targets[0].stack
    assert (stack.driver, stack.gpus) == ("580", ("L4", "H100"))
    assert "read from nvidia-smi" not in out
    # one of the two from the host
    spec.unlink()
    code, out, _ = init(capsys, "-f", str(spec), "--driver", "580")
    assert load_spec(str(spec)).targets[0].stack.gpus == ("A100",)
    assert "GPU A100 read from nvidia-smi" in out


def test_a_bad_flag_value_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_smi
) -> None:
    code, _, err = init(capsys, "-f", str(tmp_path / "e.toml"), "--gpu", "H1OO")
    assert code == 2 and "--gpu 'H1OO'" in err and not (tmp_path / "e.toml").exists()


def test_init_o_into_a_missing_folder_names_it(capsys: pytest.CaptureFixture[str], no_smi: None) -> None:
    """The issue's own command: -o, which render and bake use for their output."""
    code, _, err = init(capsys, "-o", "/nope/dir/envbuild.toml")
    assert code == 2
    assert "/nope/dir does not exist" in err and "fix: create it first" in err
    assert not Path("/nope").exists()
