"""Apply a refresh's edits to matrix/*.toml as text, so comments, order and layout survive.

A TOML library would reformat the files and drop every comment that records where a fact came
from. The edits are few and shaped by the files' own style (one key per line, single-line arrays),
so they are done on lines; the result is then parsed and checked as a whole matrix before anything
is written, and written file by file atomically.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from envbuild._util.files import write_atomic
from envbuild.errors import MatrixError
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import load_matrix
from envbuild.refresh.model import Edit, Finding, toml_string


def apply_edit(text: str, edit: Edit, where: str) -> str:
    if edit.kind == "append-version":
        pattern = re.compile(r'^(versions = \[[^\]\n]*"' + re.escape(edit.anchor) + r'"[^\]\n]*)\]', re.M)
        match = pattern.search(text)
        if not match:
            raise MatrixError(
                f"{where}: no single-line `versions = [...]` holding {edit.anchor!r} to add {edit.text!r} to",
                fix="add the version by hand, or write the row's versions on one line",
            )
        return text[: match.end(1)] + f', "{edit.text}"]' + text[match.end() :]
    if edit.kind == "set-key":
        lines = text.split("\n")
        start = next(
            (
                i
                for i, line in enumerate(lines)
                if line.strip() == f'cuda = "{edit.anchor}"' and _in_image(lines, i)
            ),
            None,
        )
        if start is None:
            raise MatrixError(f"{where}: no [[image]] row with cuda = {edit.anchor!r}", fix="edit it by hand")
        end = start
        while end + 1 < len(lines) and lines[end + 1].strip() and not lines[end + 1].startswith("["):
            end += 1
        insert = next((i for i in range(start, end + 1) if lines[i].startswith("source")), end + 1)
        lines.insert(insert, edit.text)
        return "\n".join(lines)
    if edit.kind == "set-variant":
        return _set_variant(text, edit, where)
    if edit.kind == "replace-file":  # a generated file (requirements.toml): the edit is its new text
        return edit.text
    if edit.kind == "append-block":
        return text.rstrip("\n") + "\n\n" + edit.text.rstrip("\n") + "\n"
    raise ValueError(f"unknown edit kind {edit.kind!r}")


def _set_variant(text: str, edit: Edit, where: str) -> str:
    """Set keys of one [[release.variant]] (anchor "FIRST-VERSION NAME"); a text line "-key" drops it.
    A key the variant lacks goes just before its `source` line, so the file keeps its order."""
    first, name = edit.anchor.split(" ", 1)
    lines = text.split("\n")
    release = next(
        (i for i, line in enumerate(lines) if line.startswith("versions = [") and f'["{first}"' in line),
        None,
    )
    if release is None:
        raise MatrixError(
            f"{where}: no [[release]] row whose versions start with {first!r}", fix="edit it by hand"
        )
    start = None
    for i in range(release + 1, len(lines)):
        if lines[i].startswith("[[release]]"):
            break
        if lines[i].strip() == f"name = {toml_string(name)}":
            start = i
            break
    if start is None:
        raise MatrixError(f"{where}: the {first} row has no variant {name!r}", fix="edit it by hand")
    end = start
    while end + 1 < len(lines) and lines[end + 1].strip() and not lines[end + 1].lstrip().startswith("["):
        end += 1
    block = lines[start : end + 1]
    for change in edit.text.split("\n"):
        if not change.strip():
            continue
        key = change.lstrip("-").split("=", 1)[0].strip()
        at = next((i for i, line in enumerate(block) if line.strip().split(" ", 1)[0] == key), None)
        if change.startswith("-"):
            if at is not None:
                del block[at]
        elif at is not None:
            block[at] = f"  {change}"
        else:
            before = next(
                (i for i, line in enumerate(block) if line.strip().startswith("source =")), len(block)
            )
            block.insert(before, f"  {change}")
    return "\n".join(lines[:start] + block + lines[end + 1 :])


def _in_image(lines: list[str], index: int) -> bool:
    for line in reversed(lines[:index]):
        if line.startswith("["):
            return line.strip() == "[[image]]"
    return False


def edited_texts(root: str, findings: list[Finding]) -> dict[str, str]:
    """relative path -> new text, for every file a finding edits."""
    texts: dict[str, str] = {}
    for finding in findings:
        if finding.edit is None:
            continue
        if finding.file not in texts and edit_reads(finding.edit):
            with open(os.path.join(root, finding.file), encoding="utf-8") as handle:
                texts[finding.file] = handle.read()
        texts[finding.file] = apply_edit(texts.get(finding.file, ""), finding.edit, finding.file)
    return texts


def edit_reads(edit: Edit) -> bool:
    """Whether the edit changes the file's text (False: it replaces the whole file, which may not exist)."""
    return edit.kind != "replace-file"


def write_checked(root: str, texts: dict[str, str]) -> None:
    """Check the edited matrix in a scratch copy, then replace the files; on any error nothing is
    written, and the message names the rows `envbuild matrix check` rejects."""

    with tempfile.TemporaryDirectory(prefix="envbuild-refresh-") as scratch:
        copy = os.path.join(scratch, "matrix")
        shutil.copytree(root, copy)
        for rel, text in texts.items():
            with open(os.path.join(copy, rel), "w", encoding="utf-8") as handle:
                handle.write(text)
        try:
            problems = check_matrix(load_matrix(copy))
        except MatrixError as exc:
            raise MatrixError(
                f"the refreshed rows do not validate, so nothing was written:\n  {exc.message}",
                fix="run without --write and add the rows by hand; please report the refresh bug",
            ) from None
        if problems:
            raise MatrixError(
                "the refreshed rows fail `envbuild matrix check`, so nothing was written:\n  "
                + "\n  ".join(problems[:20]),
                fix="run without --write and add the rows by hand; please report the refresh bug",
            )
    for rel, text in texts.items():
        write_atomic(os.path.join(root, rel), text)
