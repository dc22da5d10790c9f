"""The explorer's HTML pieces: escaped text, links to sources, table rows carrying the filter's keys.

The page is Markdown with raw HTML blocks; every value goes through `html.escape` here, so a matrix
note with a `<` or a quote cannot break the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

_WORD = re.compile(r"[a-z0-9._]+")


def attrs(values: dict[str, str | None]) -> str:
    """` name="value"` pairs, in the order given; None leaves the attribute out."""
    return "".join(f' {name}="{escape(value)}"' for name, value in values.items() if value is not None)


def link(text: str, href: str, *, title: str | None = None) -> str:
    """A link to a source."""
    return f'<a href="{escape(href)}"{attrs({"title": title})}>{escape(text)}</a>'


def cell(inner: str, data: dict[str, str | None] | None = None, css: str | None = None) -> str:
    """A table cell holding already-escaped HTML (`inner`)."""
    return f"<td{attrs({'class': css, **(data or {})})}>{inner}</td>"


def words(*texts: str) -> str:
    """The words the filter matches a row by, lowercase and once each: "RTX 4090" -> "rtx 4090"."""
    found: dict[str, None] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            found[word] = None
    return " ".join(found)


def row(
    cells: Iterable[str],
    *,
    gpu: str | None = None,
    branches: Iterable[int] = (),
    css: str | None = None,
    data: dict[str, str | None] | None = None,
) -> str:
    """A row the filter reads: the GPU it is about (data-gpu; the GPU table gives each GPU's words) and
    the driver branches it answers for (data-branches)."""
    numbers = " ".join(str(b) for b in branches) or None
    values = {"class": css, "data-gpu": gpu, "data-branches": numbers, **(data or {})}
    return f"<tr{attrs(values)}>{''.join(cells)}</tr>"


def table(name: str, headers: Iterable[str], rows: Iterable[str], *, searchable: bool = True) -> str:
    """A filterable table: the filter (docs/javascripts/explorer.js) narrows the rows of every table
    marked data-explorer-table, and shows the note after it when none is left. One line per row and
    no blank line inside, so Markdown passes the block through untouched. No class on the table: the
    theme styles tables without one.

    searchable=False keeps the table out of the site's search index (the theme's
    data-search-exclude), which would otherwise grow by the table's whole text. The theme's indexer
    then skips every later table of the page too, so only the page's last table may use it."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "\n".join(rows)
    exclude = "" if searchable else " data-search-exclude"
    return (
        f'<table data-explorer-table="{escape(name)}"{exclude}>\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n"
        f'<p class="explorer-empty" data-explorer-empty="{escape(name)}" hidden>'
        "No row matches the filter.</p>"
    )
