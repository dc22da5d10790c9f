"""The few Markdown pieces the reference pages are made of: escaped text, code spans and tables.

Help strings and meanings come from the code, written for a terminal: `<-o DIR>`, `nvidia/*/lib` or
`a|b` would turn into HTML, emphasis or a new table column if pasted into Markdown as they are.
Everything the generators put into a page goes through `text` or `code`, so what the page shows is
what the code says, character for character.
"""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"(`[^`]*`)")
# what Markdown (or the HTML it may hold) would act on outside a code span
_ESCAPES = {
    "\\": "\\\\",
    "*": "\\*",
    "_": "\\_",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
    "<": "&lt;",
    ">": "&gt;",
    "&": "&amp;",
}


def _escape_plain(part: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in part)


def text(value: str) -> str:
    """`value` as literal Markdown text on one line: its `code spans` kept as code, everything else
    escaped, newlines folded into spaces."""
    one_line = " ".join(value.split())
    parts = _CODE_SPAN.split(one_line)
    return "".join(
        part if part.startswith("`") and part.endswith("`") and len(part) > 1 else _escape_plain(part)
        for part in parts
    )


def code(value: object) -> str:
    """`value` as one inline code span (a span that holds backticks gets a longer fence)."""
    shown = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    padded = f" {shown} " if shown.startswith("`") or shown.endswith("`") else shown
    return f"{fence}{padded}{fence}"


def codes(values: object, separator: str = ", ") -> str:
    """Each value as a code span, joined."""
    return separator.join(code(value) for value in values)  # type: ignore[attr-defined]


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A Markdown table; the cells are Markdown already (made with `text` and `code`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)} columns: {row}")
        lines.append("| " + " | ".join(cell or " " for cell in row) + " |")
    return "\n".join(lines) + "\n"


def anchor(heading: str) -> str:
    """The id MkDocs' toc extension gives a heading (its default slugify), to link to it."""
    slug = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", slug)
