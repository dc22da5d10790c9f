"""The docs' table of bounds is envbuild/_util/limits.py's, row for row (issue 33: "the security
section states every limit and what it defends"; since issue 39 that section is the trust model page,
docs/concepts/trust-model.md). A bound added, changed or dropped in the code without the page fails
here, and so does a row the code no longer has."""

from __future__ import annotations

import re

from envbuild._util import limits
from tests.helpers.paths import REPO

PAGE = REPO / "docs" / "concepts" / "trust-model.md"


def _table() -> list[str]:
    text = PAGE.read_text()
    match = re.search(r"<!-- limits-table:.*?-->\n(.*?)<!-- /limits-table -->", text, re.S)
    assert match, f"{PAGE.relative_to(REPO)} has no limits table between its markers"
    return [line for line in match.group(1).splitlines() if line.startswith("| ")][1:]


def _row(limit: limits.Limit) -> str:
    override = f"`{limit.env}`" if limit.env else "—"
    return f"| {limit.name} | {limit.shown()} | {override} | {limit.defends} |"


def test_the_trust_model_table_lists_every_bound_as_the_code_sets_it() -> None:
    expected = [_row(limit) for limit in limits.ALL]
    shown = "\n".join(expected)
    assert _table() == expected, f"{PAGE.relative_to(REPO)}'s limits table should read:\n{shown}"


def test_every_bound_in_the_module_is_in_all() -> None:
    defined = [value for value in vars(limits).values() if isinstance(value, limits.Limit)]
    assert sorted(limit.name for limit in defined) == sorted(limit.name for limit in limits.ALL)
