"""The README is the front page people read (issue 39): short, the two quickstart commands at the top
exactly as they are, and every link in it leading somewhere on GitHub. The manual it used to be lives
in docs/, which `mkdocs build --strict` checks; the README is not part of the site, so its links are
checked here."""

from __future__ import annotations

import re

from tests.helpers.paths import REPO

README = REPO / "README.md"
MOST_LINES = 200  # issue 39: "README <= 200 lines"
QUICKSTART = [
    "make install && .venv/bin/envbuild resolve --driver 550",
    "make test",
]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def first_code_block(text: str) -> list[str]:
    """The lines of the README's first fenced code block, comments and trailing spaces removed."""
    block = text.split("```", 2)[1]
    lines = block.splitlines()[1:]  # the fence's info string (`sh`) is the first line
    return [line.split("#", 1)[0].rstrip() for line in lines if line.strip()]


def relative_links(text: str) -> list[str]:
    """The README's Markdown links that point into the repository (not http, mailto or an anchor)."""
    return [target for target in _LINK.findall(text) if not re.match(r"^([a-z]+:|#)", target)]


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MOST_LINES, f"README.md has {len(lines)} lines; the reference belongs in docs/"


def test_the_quickstart_commands_come_first_and_unchanged() -> None:
    text = README.read_text(encoding="utf-8")
    assert first_code_block(text) == QUICKSTART
    assert text.index("```") < text.index("\n## ", text.index("## Quickstart") + 1)  # in the first section


def test_every_link_in_the_readme_names_a_file_in_the_repository() -> None:
    links = relative_links(README.read_text(encoding="utf-8"))
    assert "docs/getting-started.md" in links  # the scan works, and the tutorial is linked
    missing = [link for link in links if not (REPO / link.split("#", 1)[0]).exists()]
    assert missing == []


def test_every_docs_page_the_readme_links_is_in_the_site() -> None:
    """A page under docs/ that the README links must be one the site builds (in mkdocs.yml's nav), or
    the README points at something the site does not show."""
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    links = relative_links(README.read_text(encoding="utf-8"))
    pages = [link.removeprefix("docs/").split("#", 1)[0] for link in links if link.startswith("docs/")]
    assert [page for page in pages if page.startswith("concepts/")], "the README links no concept page"
    assert [page for page in pages if f": {page}\n" not in nav] == []
