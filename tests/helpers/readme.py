"""What README.md promises, read the way a newcomer reads it: each command's synopsis and the
environment variables it lists, for the tests that hold the README to the code."""

from __future__ import annotations

import re

from tests.helpers.paths import REPO

README = REPO / "README.md"
_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def code_block_lines(text: str) -> list[str]:
    """Every line inside a fenced code block, in order; a blank line separates blocks."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            lines.append("")
            continue
        if inside:
            lines.append(line)
    return lines


def synopsis(text: str, command: str) -> str | None:
    """The first code-block line that runs `envbuild COMMAND`, with its indented continuation lines,
    comments removed: the command's synopsis. None when the README has none."""
    lines = code_block_lines(text)
    for index, line in enumerate(lines):
        rest = line[len(f"envbuild {command}") :]
        if line.startswith(f"envbuild {command}") and (not rest or rest[0] == " "):
            parts = [line]
            for following in lines[index + 1 :]:
                if not following.startswith(" ") or not following.strip():
                    break
                parts.append(following)
            return " ".join(part.split("#", 1)[0] for part in parts)
    return None


def synopsis_flags(text: str) -> set[str]:
    """The flags a synopsis names (`--gpu`, `-f`), not their values (`NAME_OR_CC`, `gpu|cpu`)."""
    return set(_FLAG.findall(text))


def environment_table(text: str) -> set[str]:
    """The variables the README's "Environment variables" table lists (its first column)."""
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(ENVBUILD_[A-Z0-9_]+)", section, re.MULTILINE))
