"""Quoting every CI generator shares: a value from a spec or the command line becomes one shell word of
a script (`shell_word`), a YAML scalar or block that reads back as that same text (`yaml_scalar`,
`yaml_block`), or the tail of a `#` comment line (`comment_text`).

Two layers read a CI script, so a value in one is quoted twice: shell-quoted (shlex.quote) into the
script, then the script YAML-quoted into the file. GitHub Actions and GitLab CI both read YAML 1.1/1.2
and run scripts with a POSIX shell, so one set of filters serves both generators.
"""

from __future__ import annotations

import json
import re
import shlex

# --- shell quoting: one word of a run: script -----------------------------------------------------


def shell_word(value: object) -> str:
    """`value` as one bash word that reads back as exactly its text (the template's `sh` filter)."""
    return shlex.quote(str(value))


def comment_text(value: str) -> str:
    """Text for the end of a `#` comment line: as is when every character is printable (no line or
    paragraph separator, which YAML 1.1 reads as a line break), else as a JSON string on one line."""
    return value if value.isprintable() else json.dumps(value)


# --- YAML quoting: the template's scalar filters ---------------------------------------------------

# Plain (unquoted) only when YAML 1.1 and 1.2 both read the text back as this same string.
_PLAIN_RE = re.compile(r"^[A-Za-z_/$][A-Za-z0-9_./@+=$,:{}()\[\]'\" -]*$")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _plain(text: str) -> bool:
    return (
        bool(_PLAIN_RE.match(text))
        and text == text.strip()
        and text.lower() not in _RESERVED
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
    )


def yaml_scalar(value: object) -> str:
    """A YAML scalar that reads back as `value`: plain when that is unambiguous, else double-quoted
    (a JSON string is a valid YAML double-quoted string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} as YAML")
    return value if _plain(value) else json.dumps(value)


def _literal(value: str) -> bool:
    """Whether a `|` block holds `value` exactly: one final newline, printable, no trailing spaces."""
    return (
        "\n" in value.rstrip("\n")
        and value.endswith("\n")
        and not value.endswith("\n\n")
        and not value.startswith((" ", "\n"))
        and all(c == "\n" or c.isprintable() for c in value)
        and not any(line != line.rstrip() for line in value.splitlines())
    )


def yaml_block(value: str, indent: int) -> str:
    """Multi-line text after `key: `: a literal block indented by `indent`, or a scalar when a block
    would not read back as the same text."""
    if not _literal(value):
        return yaml_scalar(value)
    pad = " " * indent
    return "|\n" + "\n".join(f"{pad}{line}" if line else "" for line in value[:-1].split("\n"))
