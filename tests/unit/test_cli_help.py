"""`--help` as a newcomer meets it (issue 17, items 15 and 16): commands in pipeline order, every one
with a description, and shell completion scripts generated from the same parser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.cli.parser import build_parser
from tests.helpers.paths import REPO

# The order the data flows (docs/development.md, "How the code is laid out"): write the spec, resolve, lock,
# render, build (its audit gate), verify, promote; then the scale-out generators, the host and the
# data; completion last.
PIPELINE_ORDER = [
    "init", "resolve", "lock", "vendor", "render", "build", "audit", "verify", "promote", "attest", "bake",
    "ci", "doctor", "smoke", "matrix", "completion",
]  # fmt: skip

PARSERS = build_parser(every=True)[1]
ENVBUILD = str(Path(sys.executable).with_name("envbuild"))


def listed_commands(help_text: str) -> list[str]:
    """The command names `envbuild --help` lists, in its order."""
    body = help_text.split("  COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return [line.split()[0] for line in body.splitlines() if line.startswith("    ") and line[4] != " "]


def test_help_lists_the_commands_in_pipeline_order(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert listed_commands(capsys.readouterr().out) == PIPELINE_ORDER


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_command_and_subcommand_has_a_description(path: str) -> None:
    description = PARSERS[path].description
    assert description and len(description) > 40, f"`envbuild {path} --help` has no description"


@pytest.mark.parametrize("path", ["init", "ci github", "matrix check"])
def test_help_of_a_command_prints_its_description(capsys, path: str) -> None:
    with pytest.raises(SystemExit):
        main([*path.split(), "--help"])
    out = capsys.readouterr().out
    assert PARSERS[path].description.split()[0] in out.split("\n\n", 2)[1]


def completion(shell: str) -> str:
    done = subprocess.run([ENVBUILD, "completion", shell], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bash_completion_names_every_command_and_flag() -> None:
    script = completion("bash")
    for path, parser in PARSERS.items():
        words = path.split()
        if words:
            assert words[-1] in script, path
        for action in parser._actions:
            for option in action.option_strings:
                assert f" {option}" in script or f"({option}" in script, f"{path} {option}"


def test_bash_completion_script_registers_and_completes() -> None:
    """Sourced into a real bash, the script registers a completion function, and that function
    offers the subcommands after `envbuild ` and resolve's flags after `envbuild resolve --d`."""
    script = (
        f'source <("{ENVBUILD}" completion bash) && complete -p envbuild && '
        'COMP_WORDS=(envbuild ""); COMP_CWORD=1; COMP_LINE="envbuild "; COMP_POINT=9; '
        '_shtab_envbuild envbuild "" envbuild; echo "first: ${COMPREPLY[*]}"; '
        'COMP_WORDS=(envbuild resolve --d); COMP_CWORD=2; COMP_LINE="envbuild resolve --d"; COMP_POINT=20; '
        '_shtab_envbuild envbuild --d resolve; echo "resolve: ${COMPREPLY[*]}"'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("complete ") and "envbuild" in lines[0]
    first = next(line for line in lines if line.startswith("first: ")).split()[1:]
    assert {"init", "resolve", "lock", "matrix", "completion"} <= set(first)
    assert "--driver" in next(line for line in lines if line.startswith("resolve: "))


def test_zsh_gets_a_script_naming_the_commands_and_their_flags() -> None:
    script = completion("zsh")
    assert script.startswith("#compdef envbuild")
    assert "resolve" in script and "--driver" in script and "refresh" in script and "--audit" in script


def test_completion_of_an_unknown_shell_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["completion", "tcsh"])
    assert info.value.code == 2
    assert "argument shell: invalid choice: 'tcsh'" in capsys.readouterr().err


def test_resolve_does_not_import_the_completion_library() -> None:
    code = (
        "import sys; from envbuild.cli.app import main; main(['resolve','--driver','550','--json']);"
        "sys.stderr.write(repr('shtab' in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=os.environ, check=False
    )
    assert done.returncode == 0 and done.stderr.strip() == "False"
