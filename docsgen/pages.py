"""Which pages the docs build generates, and from what: site path -> a function returning the page's
Markdown. The hook (docsgen/hooks.py) adds each to the site; the tests build them the same way."""

from __future__ import annotations

from collections.abc import Callable

from docsgen import cli_reference, environment, exit_codes, formats, spec_reference
from docsgen.explorer import explorer_page

GENERATED: dict[str, Callable[[], str]] = {
    "explorer.md": explorer_page,
    "reference/cli.md": cli_reference.page,
    "reference/envbuild-toml.md": spec_reference.page,
    "reference/exit-codes.md": exit_codes.page,
    "reference/environment.md": environment.page,
    "reference/formats.md": formats.page,
}
