"""`ci github --action-pins FILE`: every `uses:` of the workflow pinned to a commit SHA.

A tag such as `actions/checkout@v4` can be moved to other code by whoever controls the action's
repository; a full commit SHA cannot. The pins are the user's to choose and review (envbuild does not
look them up: that would trust the very tag the pin is meant to stop trusting), in a plain file, one
pin a line:

    # action@ref = the commit that ref named when you reviewed it
    actions/checkout@v4 = 11bd71901bbe5b1630ceea73d27597364c9af683

Blank lines and `#` comments are ignored; a pin for an action the workflow does not use is fine (one
file can serve several workflows). A line that is not `owner/repo[/path]@ref = <40 hex>`, or an
action the workflow uses that has no pin, is a usage error naming the file and the action.
"""

from __future__ import annotations

import re

from envbuild.errors import UsageError

FLAG = "--action-pins"
_ACTION_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[A-Za-z0-9_./-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_FIX = "one line per action: `owner/repo@ref = <the 40-hex commit SHA>` (e.g. `git ls-remote` the tag)"


def read_pins(path: str) -> dict[str, str]:
    """The pin file at `path`: action@ref -> commit SHA."""
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular

    try:
        lines = read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8").splitlines()
    except NotReadable as exc:
        raise UsageError(
            f"{FLAG} {path}: cannot read it ({exc})", fix=f"pass a regular text file; {_FIX}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{FLAG} {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})",
            fix=f"pass a readable text file; {_FIX}",
        ) from None
    pins: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        action, equals, sha = (part.strip() for part in line.partition("="))
        where = f"{FLAG} {path}, line {number}"
        if not equals or not _ACTION_RE.fullmatch(action):
            raise UsageError(f"{where}: {line!r} is not `owner/repo@ref = SHA`", fix=_FIX)
        if not _SHA_RE.fullmatch(sha):
            raise UsageError(
                f"{where}: the pin of {action} is {sha!r}, not a full commit SHA (40 lowercase hex digits)",
                fix=_FIX,
            )
        if pins.get(action, sha) != sha:
            raise UsageError(f"{where}: {action} is pinned twice, to different commits", fix="keep one line")
        pins[action] = sha
    return pins


def pin_actions(actions: dict[str, str], pins: dict[str, str], path: str) -> dict[str, str]:
    """`actions` (key -> owner/repo@ref) with each ref replaced by its pinned SHA and the ref kept as a
    trailing comment, as `owner/repo@<sha> # v4` (what Dependabot and Renovate read and update)."""
    missing = [action for action in actions.values() if action not in pins]
    if missing:
        raise UsageError(
            f"{FLAG} {path} has no pin for {', '.join(missing)}, which the workflow uses",
            fix=f"add a line for each: {_FIX}",
        )
    pinned = {}
    for key, action in actions.items():
        name, ref = action.rsplit("@", 1)
        pinned[key] = f"{name}@{pins[action]} # {ref}"
    return pinned
