"""Which pages the docs build generates, and from what: site path -> a function returning the page's
Markdown. The hook (docsgen/hooks.py) adds each to the site; the tests build them the same way."""

from __future__ import annotations

from collections.abc import Callable

from docsgen.explorer import explorer_page


def _placeholder(title: str) -> Callable[[], str]:
    return lambda: f"# {title}\n\nGenerated at build time (issue 39: not written yet).\n"


GENERATED: dict[str, Callable[[], str]] = {
    "explorer.md": explorer_page,
    "reference/cli.md": _placeholder("Commands"),
    "reference/envbuild-toml.md": _placeholder("envbuild.toml"),
    "reference/exit-codes.md": _placeholder("Exit codes"),
    "reference/environment.md": _placeholder("Environment variables"),
    "reference/formats.md": _placeholder("Records and reports"),
}
