"""One place that knows tomllib is stdlib only from Python 3.11, and that too deep a nesting is a
decode error: tomllib recurses per nested array or inline table, so a spec, lock or matrix file of
`a = [[[[...` raised RecursionError past every `except TOMLDecodeError` (issue 33)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError


def loads(text: str) -> dict:
    """tomllib.loads(text), with RecursionError raised as TOMLDecodeError, and so is the plain
    ValueError tomllib lets through for an integer of more than 4300 digits (Python's int conversion
    limit): `driver = 1111…` was an internal error of every TOML reader."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise TOMLDecodeError("nested deeper than envbuild reads") from None
    except TOMLDecodeError:
        raise
    except ValueError as exc:
        raise TOMLDecodeError(f"a value envbuild cannot read ({str(exc).split(';')[0]})") from None
