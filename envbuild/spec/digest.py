"""The spec's digest, the one a lock records as `spec-digest`: sha256 of envbuild.toml's bytes, less its
site tables.

`[mirrors]` and `[site]` say where a site fetches from, not what it builds: the lock holds canonical
sources, so one lock serves every site. Adding, changing or removing them must not make the lock out
of date (a lock made without mirrors still checks once the spec gains some). So the digest covers the
file with those tables' lines taken out: the header, its lines up to the next table, the blank lines
that separate it from the next table (or, at the file's end, from the table before it) and the
comment lines directly above its header. A file without them digests exactly as before, byte for
byte, so every lock written until now still checks.

Only what is provably the same spec is stripped: when the stripped text does not parse to the same
data less those tables (a dotted `site.matrix = ...` key, a header inside a multi-line string), the
whole file's bytes are digested, and the site settings count as content.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

SITE_TABLES = ("mirrors", "site")
_HEADER_RE = re.compile(r"^\s*\[\s*(mirrors|site)\s*\]\s*(#.*)?$")
_ANY_HEADER_RE = re.compile(r"^\s*\[")


def _blank(line: str) -> bool:
    return not line.strip()


def _comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def without_site_tables(text: str) -> str:
    """`text` with the [mirrors] and [site] tables' lines removed (see the module's docstring)."""
    lines = text.splitlines(keepends=True)
    keep = [True] * len(lines)
    index = 0
    while index < len(lines):
        if not _HEADER_RE.match(lines[index].rstrip("\r\n")):
            index += 1
            continue
        start = index
        while start > 0 and keep[start - 1] and _comment(lines[start - 1]):
            start -= 1
        end = index + 1
        while end < len(lines) and not _ANY_HEADER_RE.match(lines[end]):
            end += 1
        # `end` is the next header or the end of the file: trailing blank lines before a next table
        # go with the removed block; at the end of the file, the blank lines before the block do
        if end == len(lines):  # (over any table removed before it, up to the last line kept)
            while start > 0 and (not keep[start - 1] or _blank(lines[start - 1])):
                start -= 1
        for at in range(start, end):
            keep[at] = False
        index = end
    return "".join(line for line, kept in zip(lines, keep, strict=True) if kept)


def spec_digest(raw: bytes, data: dict[str, Any]) -> str:
    """sha256 hex of the spec without its site tables; of all of `raw` when they cannot be cut out
    exactly (or there are none)."""
    if not any(name in data for name in SITE_TABLES):
        return hashlib.sha256(raw).hexdigest()
    from envbuild._util import toml

    text = raw.decode("utf-8")
    stripped = without_site_tables(text)
    try:
        same = toml.loads(stripped) == {k: v for k, v in data.items() if k not in SITE_TABLES}
    except toml.TOMLDecodeError:
        same = False
    return hashlib.sha256((stripped if same else text).encode("utf-8")).hexdigest()
