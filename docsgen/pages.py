"""Which pages the docs build generates, and from what: site path -> a function returning the page's
Markdown. The hook (docsgen/hooks.py) adds each to the site; the tests build them the same way."""

from __future__ import annotations

from collections.abc import Callable

GENERATED: dict[str, Callable[[], str]] = {}
