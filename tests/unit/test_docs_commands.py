"""Every `envbuild` command line the guides show names a command envbuild has and only flags that
command takes, as the argument parser defines them: a guide cannot teach a flag that was renamed or
never existed. Checked in the getting-started page, the CI page, troubleshooting, smoke checks,
attestations and every how-to guide: every line of their sh blocks, and the `$ ` commands of their
console blocks (not the output, where envbuild's own messages quote commands too)."""

from __future__ import annotations

import re
import shlex

import pytest

from envbuild.cli.parser import build_parser
from tests.helpers import console
from tests.helpers.paths import REPO

DOCS = REPO / "docs"
PAGES = [
    DOCS / name
    for name in ("getting-started.md", "ci.md", "troubleshooting.md", "smoke-checks.md", "attest.md")
] + sorted((DOCS / "how-to").glob("*.md"))
PARSERS = {path: parser for path, parser in build_parser(every=True)[1].items() if path}
_ENDS = {"&&", "||", "|", ";", ">", ">>", "2>&1"}


def invocations(text: str) -> list[list[str]]:
    """The words of each `envbuild ...` command in a block: lines joined at a trailing backslash, a
    leading `$ ` prompt dropped, each command cut at a shell operator, a redirection or a comment."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.removeprefix("$ ")
        for match in re.finditer(r"(?:^|[\s(`\"'])envbuild (?=[a-z])", line):
            try:
                words = shlex.split(line[match.end() :], comments=True)
            except ValueError:  # an unbalanced quote: prose quoting part of a command
                words = line[match.end() :].split()
            command: list[str] = []
            for word in words:
                if word in _ENDS or word.startswith(("`", ">")):
                    break
                command.append(word.rstrip("`"))
            found.append(command)
    return found


def command_path(words: list[str]) -> tuple[str, list[str]]:
    """("ci github", the words after it) for ["ci", "github", ...]: the longest parser path."""
    if len(words) > 1 and f"{words[0]} {words[1]}" in PARSERS:
        return f"{words[0]} {words[1]}", words[2:]
    return words[0], words[1:]


def shown_commands() -> list[tuple[str, list[str]]]:
    shown = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        blocks = [
            (line, "\n".join(body))
            for line, language, body in console.fenced_blocks(text)
            if language == "sh"
        ]
        blocks += [(command.line, command.text) for command in console.commands(text)]
        for line, block in blocks:
            for words in invocations(block):
                if words:
                    shown.append((f"{page.relative_to(REPO)}:{line}", words))
    return shown


def test_the_guides_show_envbuild_commands() -> None:
    shown = {command_path(words)[0] for _, words in shown_commands()}
    assert {"resolve", "build", "lock", "verify", "promote", "ci slurm", "ci k8s", "vendor"} <= shown


@pytest.mark.parametrize(("where", "words"), shown_commands(), ids=[w for w, _ in shown_commands()])
def test_every_command_the_guides_show_exists_with_the_flags_it_names(where: str, words: list[str]) -> None:
    path, rest = command_path(words)
    assert path in PARSERS, f"{where}: `envbuild {' '.join(words)}`: envbuild has no command {path!r}"
    known = {option for action in PARSERS[path]._actions for option in action.option_strings}
    flags = [word.split("=", 1)[0] for word in rest if re.fullmatch(r"--?[a-zA-Z][\w-]*(=.*)?", word)]
    unknown = [flag for flag in flags if flag not in known]
    assert not unknown, f"{where}: `envbuild {' '.join(words)}`: `envbuild {path}` takes no {unknown}"
