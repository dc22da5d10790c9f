"""The list of environment variables (envbuild.cli.envvars, the source of the docs' Environment
variables page) is the code's: every `ENVBUILD_*` name the tool or its templates read is listed, none is
listed that nothing reads, and the tests' own variables are listed apart."""

from __future__ import annotations

import re
from pathlib import Path

from envbuild.cli import envvars
from tests.helpers.paths import REPO

NAME = re.compile(r"\bENVBUILD_[A-Z0-9_]*[A-Z0-9]\b")
# what the tests name their own variables: ENVBUILD_TEST_*, and the one older name
TEST_NAME = re.compile(r"\bENVBUILD_(?:TEST_[A-Z0-9_]*[A-Z0-9]|REQUIRE_DOCKER)\b")
REGISTRY = REPO / "envbuild" / "cli" / "envvars.py"


def text_files(*roots: Path) -> list[Path]:
    """Every file under `roots` that reads as text, the registry itself aside."""
    found = []
    for root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            if path == REGISTRY or "__pycache__" in path.parts:
                continue
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            found.append(path)
    return found


def names_in(paths: list[Path], pattern: re.Pattern[str]) -> dict[str, list[str]]:
    """Each name `pattern` finds -> the files it is in."""
    where: dict[str, list[str]] = {}
    for path in paths:
        for name in set(pattern.findall(path.read_text(encoding="utf-8"))):
            where.setdefault(name, []).append(str(path.relative_to(REPO)))
    return where


def read_by_the_tool() -> dict[str, list[str]]:
    return names_in(text_files(REPO / "envbuild", REPO / "templates"), NAME)


def test_every_variable_the_tool_or_its_templates_name_is_listed() -> None:
    found = read_by_the_tool()
    # the scan works: names read in Python, in the smoke programs and in a template
    assert {"ENVBUILD_DEBUG", "ENVBUILD_SMOKE_STEPS", "ENVBUILD_PREFLIGHT"} <= set(found)
    assert any(path.startswith("templates/") for path in found["ENVBUILD_PREFLIGHT"])
    listed = {variable.name for variable in envvars.VARIABLES}
    assert {name: found[name] for name in sorted(set(found) - listed)} == {}


def test_every_listed_variable_is_read_somewhere() -> None:
    found = read_by_the_tool()
    assert [v.name for v in envvars.VARIABLES if v.name not in found] == []


def test_each_variable_is_listed_once_with_what_reads_it_and_what_it_does() -> None:
    every = [*envvars.VARIABLES, *envvars.TEST_VARIABLES]
    names = [v.name for v in every]
    assert len(names) == len(set(names))
    assert [v.name for v in every if not (NAME.fullmatch(v.name) and v.read_by and v.effect)] == []


def test_the_tests_own_variables_are_listed_apart_and_the_tool_reads_none() -> None:
    used = names_in(text_files(REPO / "tests", REPO / "bench", REPO / ".ci" / "run"), TEST_NAME)
    assert len(used) > 5  # the scan works
    listed = {v.name for v in envvars.TEST_VARIABLES}
    assert sorted(set(used) - listed) == []
    assert sorted(listed - set(used)) == []
    assert sorted(listed & set(read_by_the_tool())) == []
    assert sorted(listed & {v.name for v in envvars.VARIABLES}) == []
