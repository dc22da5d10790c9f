"""json.loads for text envbuild did not write: too deep a nesting is a decode error, not a crash.

Python's json parser recurses once per nested array or object, so `[[[[...` a hundred thousand deep
raises RecursionError, which no `except ValueError` around a parse catches: a hostile lock, report,
registry manifest, attestation or credential helper's answer ended `envbuild` in a traceback
(issue 33). Here it is a json.JSONDecodeError, a ValueError every reader already handles, at the
depth Python's own recursion limit allows (about 1000 levels; every document envbuild reads nests
fewer than 20).
"""

from __future__ import annotations

import json

from envbuild._util.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def parse_json(text: str | bytes | bytearray) -> Any:
    """json.loads(text), with RecursionError raised as json.JSONDecodeError."""
    try:
        return json.loads(text)
    except RecursionError:
        shown = text if isinstance(text, str) else ""
        raise json.JSONDecodeError("nested deeper than envbuild reads", shown, 0) from None
