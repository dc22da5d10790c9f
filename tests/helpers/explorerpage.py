"""The built compatibility explorer (site/explorer/index.html) read back with the standard library's
HTML parser, as the tests see it: its tables' rows and cells with their attributes and links, and
every resource the page would load.

Nothing here imports docsgen: the tests judge the page a reader gets, not the generator's data.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from envbuild._util.record import Record


class Cell(Record):
    __slots__ = ("attrs", "links", "stacks", "text")
    attrs: dict[str, str]
    links: tuple[str, ...]  # every href in the cell
    # attributes of the elements inside it that describe a stack (the --compat minor line)
    stacks: tuple[dict[str, str], ...]
    text: str


class Row(Record):
    __slots__ = ("attrs", "cells")
    attrs: dict[str, str]
    cells: tuple[Cell, ...]

    @property
    def branches(self) -> list[int]:
        return [int(b) for b in self.attrs.get("data-branches", "").split()]

    def framework_cell(self, framework: str) -> Cell | None:
        return next((c for c in self.cells if c.attrs.get("data-framework") == framework), None)


class Resource(Record):
    """Something the page loads by itself (not a link a reader clicks)."""

    __slots__ = ("tag", "attribute", "url")
    tag: str
    attribute: str
    url: str


# what a browser fetches on its own when it renders the page
_LOADS = {
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
    "embed": "src",
    "object": "data",
    "track": "src",
}


class _OpenCell:
    """A cell while its contents are being read."""

    def __init__(self, attrs: dict[str, str]) -> None:
        self.attrs = attrs
        self.links: list[str] = []
        self.stacks: list[dict[str, str]] = []
        self.text: list[str] = []

    def close(self) -> Cell:
        text = " ".join("".join(self.text).split())
        return Cell(attrs=self.attrs, links=tuple(self.links), stacks=tuple(self.stacks), text=text)


class ExplorerPage(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[Row]] = {}
        self.resources: list[Resource] = []
        self.attributes: dict[str, dict[str, str]] = {}  # element id -> its attributes
        self._table: str | None = None
        self._row: tuple[dict[str, str], list[Cell]] | None = None
        self._cell: _OpenCell | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.attributes[values["id"]] = values
        self._note_resource(tag, values)
        if tag == "table" and "data-explorer-table" in values:
            self._table = values["data-explorer-table"]
            self.tables[self._table] = []
        elif self._table is None:
            return
        elif tag == "tr":
            self._row = (values, [])
        elif tag == "td" and self._row is not None:
            self._cell = _OpenCell(values)
        elif self._cell is not None:
            if tag == "a" and "href" in values:
                self._cell.links.append(values["href"])
            if "data-framework" in values:
                self._cell.stacks.append(values)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row[1].append(self._cell.close())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._row[1]:  # the header row has th cells only
                self.tables[self._table].append(Row(attrs=self._row[0], cells=tuple(self._row[1])))
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text.append(data)

    def _note_resource(self, tag: str, values: dict[str, str]) -> None:
        if tag == "link" and values.get("href"):
            self.resources.append(Resource(tag=tag, attribute="href", url=values["href"]))
        attribute = _LOADS.get(tag)
        if attribute and values.get(attribute):
            self.resources.append(Resource(tag=tag, attribute=attribute, url=values[attribute]))
        if values.get("srcset"):
            self.resources.append(Resource(tag=tag, attribute="srcset", url=values["srcset"]))


def read_explorer(site: Path) -> ExplorerPage:
    page = ExplorerPage()
    page.feed((site / "explorer" / "index.html").read_text(encoding="utf-8"))
    page.close()
    return page
