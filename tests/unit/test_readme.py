"""The README says what the code does (issue 17, item 16): every command's synopsis names exactly the
parser's flags, every ENVBUILD_* variable the code reads is documented, and the scripts hard-code no
Debian mirror."""

from __future__ import annotations

import re

import pytest

from envbuild.cli.parser import build_parser
from tests.helpers.paths import REPO
from tests.helpers.readme import README, environment_table, synopsis, synopsis_flags

PARSERS = {path: parser for path, parser in build_parser(every=True)[1].items() if path}
# Groups are listed by their subcommands; `envbuild ci` and `envbuild matrix` take no flags of their own.
COMMANDS = sorted(path for path, parser in PARSERS.items() if parser._subparsers is None)
ALWAYS = {"-h", "--help"}


def parser_flags(path: str) -> list[tuple[str, ...]]:
    """Each flag of the command as its option strings (`("-f", "--file")`), help aside."""
    return [
        tuple(action.option_strings)
        for action in PARSERS[path]._actions
        if action.option_strings and not set(action.option_strings) <= ALWAYS
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_synopsis_names_every_flag_of_the_command_and_no_other(command: str) -> None:
    text = synopsis(README.read_text(), command)
    assert text is not None, f"README.md has no synopsis (a code-block line `envbuild {command} ...`)"
    written = synopsis_flags(text)
    missing = [" / ".join(flag) for flag in parser_flags(command) if not written & set(flag)]
    known = {option for flag in parser_flags(command) for option in flag}
    unknown = sorted(written - known)
    assert not missing, f"the README synopsis of `envbuild {command}` lacks {missing}"
    assert not unknown, f"the README synopsis of `envbuild {command}` names flags it does not take: {unknown}"


def read_in_code() -> set[str]:
    """Every ENVBUILD_* name in envbuild/: the variables the tool (or its smoke programs) reads."""
    names: set[str] = set()
    for path in (REPO / "envbuild").rglob("*.py"):
        names |= set(re.findall(r"\bENVBUILD_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return names


def test_every_environment_variable_the_code_reads_is_in_the_readme_table() -> None:
    names = read_in_code()
    assert {"ENVBUILD_DEBUG", "ENVBUILD_INSECURE_REGISTRIES", "ENVBUILD_MATRIX"} <= names  # the scan works
    documented = environment_table(README.read_text())
    assert sorted(names - documented) == []
    assert sorted(documented - names) == []  # no row for a variable nothing reads


TEST_VARIABLE = re.compile(r"\bENVBUILD_(?:TEST_[A-Z0-9_]*[A-Z0-9]|REQUIRE_DOCKER)\b")


def test_test_only_variables_are_named_envbuild_test_and_listed_apart() -> None:
    text = README.read_text()
    used_by_tests: set[str] = set()
    for path in [*(REPO / "tests").rglob("*.py"), REPO / ".ci" / "run"]:
        used_by_tests |= set(TEST_VARIABLE.findall(path.read_text()))
    assert "ENVBUILD_TEST_REGISTRY" in used_by_tests
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    assert [name for name in sorted(used_by_tests) if f"`{name}`" not in section] == []


@pytest.mark.parametrize("path", [".ci/run", "tests/helpers/docker.py"])
def test_debootstrap_uses_its_default_mirror(path: str) -> None:
    """debootstrap picks its own default mirror: a hard-coded host breaks behind a local mirror."""
    text = (REPO / path).read_text()
    calls = [line for line in text.splitlines() if "debootstrap" in line and "bookworm" in line]
    assert calls, f"{path} no longer runs debootstrap: update this test"
    assert [line for line in calls if "http" in line] == []
