"""Exit codes that mean something (issue 17, items 5 and 11): misuse is exit 2 with a message that
names the flag or value, what is accepted and a fix; nothing exits 0 after doing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.cli.parser import build_parser
from tests.helpers.specs import TORCH_EXAMPLE


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def exits(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """argparse's own refusals end in SystemExit: (its code, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    return int(info.value.code or 0), capsys.readouterr().err


def test_no_arguments_prints_the_usage_and_exits_2(capsys) -> None:
    code, out, err = run(capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: envbuild") and "resolve" in err


@pytest.mark.parametrize("group", ["matrix", "ci"])
def test_a_group_without_its_subcommand_exits_2(capsys, group: str) -> None:
    code, _, err = run(capsys, group)
    assert code == 2
    assert err.startswith(f"usage: envbuild {group}")


# Every command that takes --matrix, with the other arguments it needs to get as far as loading it.
SPEC = str(TORCH_EXAMPLE)
MATRIX_COMMANDS = {
    "resolve": ["resolve", "--driver", "550"],
    "render": ["render", "-f", SPEC, "--stdout"],
    "lock": ["lock", "-f", SPEC, "--check"],
    "build": ["build", "-f", SPEC],
    "audit": ["audit", SPEC],
    "verify": ["verify", "envbuild/train:x", "--gpu", "H100"],  # the matrix names the audit gate's GPUs
    "bake": ["bake", "-f", SPEC],
    "ci github": ["ci", "github", "-f", SPEC],
    "ci gitlab": ["ci", "gitlab", "-f", SPEC],
    "ci k8s": ["ci", "k8s", "-f", SPEC],
    "ci slurm": ["ci", "slurm", "-f", SPEC, "-o", "slurm-scripts"],
    "init": ["init", "-f", "envbuild.toml"],
    "doctor": ["doctor"],
    "matrix check": ["matrix", "check"],
    "matrix gpus": ["matrix", "gpus"],
    "matrix refresh": ["matrix", "refresh"],
}


def test_the_matrix_table_covers_every_command_that_takes_matrix() -> None:
    parsers = build_parser(every=True)[1]
    takes = {path for path, parser in parsers.items() if "--matrix" in parser._option_string_actions}
    assert takes == set(MATRIX_COMMANDS)


@pytest.mark.parametrize("command", sorted(MATRIX_COMMANDS))
def test_a_matrix_directory_that_does_not_exist_is_a_usage_error(
    capsys, tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nope"
    code, _, err = run(capsys, *MATRIX_COMMANDS[command], "--matrix", str(missing))
    assert code == 2, err
    assert f"error: matrix directory {missing} does not exist" in err
    assert "fix: point --matrix or ENVBUILD_MATRIX at a folder" in err
    assert not (tmp_path / "docker-bake.json").exists()


def test_matrix_check_of_a_file_is_a_usage_error(capsys, tmp_path: Path) -> None:
    path = tmp_path / "drivers.toml"
    path.write_text("")
    code, _, err = run(capsys, "matrix", "check", "--matrix", str(path))
    assert code == 2 and f"{path} is not a directory" in err


def test_matrix_check_of_broken_data_still_fails_with_1(capsys, matrix_copy: Path) -> None:
    (matrix_copy / "gpus.toml").write_text("[[gpu]]\nname = 1\n")
    code, _, err = run(capsys, "matrix", "check", "--matrix", str(matrix_copy))
    assert code == 1 and "gpus.toml" in err


def test_lock_check_of_a_target_the_spec_lacks_exits_2_listing_its_targets(capsys, two_targets: Path) -> None:
    code, out, err = run(capsys, "lock", "-f", str(two_targets), "--check", "--target", "nope")
    assert code == 2
    assert out == ""
    assert "--target 'nope' is not a target of" in err
    assert "fix: use one of: h100, l4.infer" in err


@pytest.mark.parametrize("command", [["smoke"], ["verify", "envbuild-test/any:image"]])
@pytest.mark.parametrize(
    ("flag", "value", "accepted"),
    [
        ("--steps", "0", "from 1 to 10000"),
        ("--steps", "-3", "from 1 to 10000"),
        ("--steps", "many", "from 1 to 10000"),
        ("--timeout", "0", "from 10 to 86400"),
        ("--timeout", "-1", "from 10 to 86400"),
    ],
)
def test_smoke_steps_and_timeout_out_of_range_are_usage_errors(
    capsys, command: list[str], flag: str, value: str, accepted: str
) -> None:
    code, err = exits(capsys, *command, flag, value)
    assert code == 2
    assert f"argument {flag}: must be a whole number {accepted}, got '{value}'" in err


@pytest.mark.parametrize("command", [["smoke"], ["verify", "envbuild-test/any:image"]])
def test_smoke_limits_in_range_parse(command: list[str]) -> None:
    argv = [*command, "--steps", "1", "--timeout", "10"]
    args = build_parser(argv)[0].parse_args(argv)
    assert (args.steps, args.timeout) == (1, 10)


def test_lock_json_without_check_is_a_usage_error(capsys, two_targets: Path) -> None:
    code, _, err = run(capsys, "lock", "-f", str(two_targets), "--json")
    assert code == 2 and "--json goes with --check" in err
    assert not (two_targets.parent / "envbuild.lock").exists()
