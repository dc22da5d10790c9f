"""Editing a matrix copy and running `envbuild matrix check` on it: the matrix-check tests' two tools.

`edit` fails on fixture drift (the text it replaces is gone) instead of silently testing an unedited
copy, so a test about a broken row cannot pass because the row it breaks moved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main


def edit(path: Path, old: str, new: str) -> None:
    """Replace the first `old` in `path` with `new`; `old` must be there."""
    text = path.read_text()
    assert old in text, f"fixture drift: {old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def check(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    """`envbuild matrix check --matrix root`: its exit code and its stdout and stderr together."""
    code = main(["matrix", "check", "--matrix", str(root)])
    out, err = capsys.readouterr()
    return code, out + err
