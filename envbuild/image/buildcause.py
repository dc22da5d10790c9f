"""Why a build step failed, in its tool's own words: the few lines of the step's output that say so.

A failed `uv pip install` or `apt-get install` explains itself in a line or two, and then the builder
ends with words of its own that say nothing of the cause: BuildKit's `executor failed running [...]:
exit code: 1`, the classic builder's `returned a non-zero code: 1`. A build error that quotes only
those (or only lines with the word "error" in them) sends every user to build.log for uv's `cause:
Because accelerate was not found in the provided package locations`. So the engine hands each line
a step prints to a StepWords, which keeps the lines in which a tool explains a failure, and the build
error quotes the failed step's.

The lines kept are blocks: a line that starts one, and the indented lines after it (uv's explanation
runs over several, and blank lines between its paragraphs do not end it); a line that is neither
ends the block. A block starts with (the patterns are matched on real output: tests/fixtures/build/):

- uv: `error: ...` (its `cause: ...` and `hint: ...` lines follow, indented); uv 0.5 and older,
  `× ...` and `╰─▶ Because ...`; a line that starts with "because";
- pip: `ERROR: ...`, and `The conflict is caused by:` before the conflicting pins;
- apt: `E: ...` (`E: Unable to locate package X`, `E: Package 'X' has no installation candidate`),
  also after one of apt's progress texts on the same line: apt writes `Building dependency tree...`
  to stdout with no newline and its `E:` line to stderr, and BuildKit prints the two as one line
  when they arrive in one read (tests/fixtures/buildlog/apt-joined-to-progress.buildkit.log).

The classic builder's own `ERROR: The command '...' returned a non-zero code` is never a tool's line.

Bounded, because a resolver's explanation can run to dozens of lines: at most MAX_LINES lines, the
last blocks of the step (a longer block keeps its first lines), each cut to MAX_WIDTH characters,
and a count of what was left out; the rest is in build.log. Colour codes and carriage-return redraws
are taken out, and every line is redacted as all Engine text is (envbuild._util.redact): a tool that
fails to reach an index can print its URL with credentials.
"""

from __future__ import annotations

import re
from collections import deque

from envbuild._util.record import Record
from envbuild._util.redact import redact

MAX_LINES = 6  # what the error quotes of one step
MAX_WIDTH = 240  # characters of one quoted line
_KEPT_BLOCKS = 32  # per step, the last blocks, for a step that prints many errors before it stops
_KEPT_LINES = 64  # per block: a resolver explanation longer than this is cut (and counted)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_HEAD = re.compile(r"^(?:error:|ERROR:|E: |×|╰─▶|The conflict is caused by:)")
_BECAUSE = re.compile(r"^because\b", re.IGNORECASE)
_NOT_A_TOOL = re.compile(r"^ERROR: The command '.*' returned a non-zero code")
# apt's progress texts, which end without a newline when apt stops right after them
_APT_PROGRESS = re.compile(
    r"^(?:Reading package lists|Building dependency tree|Reading state information)\.\.\.(?: Done)?\s*(?=E: )"
)
# BuildKit's plain progress: "#12 0.281 <what the step printed>"; its own lines ("#12 ERROR: ...",
# "#12 DONE 0.1s", "#12 sha256:...") carry no timestamp
_BUILDKIT_OUTPUT = re.compile(r"^\d+\.\d+(?: (.*))?$")


class Causes(Record):
    """The lines a failed step's tool said of its failure (each cut and redacted), and how many
    more such lines build.log holds."""

    __slots__ = ("lines", "more")
    lines: tuple[str, ...]
    more: int


def buildkit_output(rest: str) -> str | None:
    """What a step printed, from a BuildKit plain-progress line's text after `#N ` ("0.281 text"),
    or None for BuildKit's own lines (`ERROR: ...`, `DONE 0.1s`, `sha256:...`, the step's title)."""
    match = _BUILDKIT_OUTPUT.match(rest)
    if match is None:
        return None
    return match.group(1) or ""


def _clean(line: str) -> str:
    """The line as a terminal would show it at the end: no colour codes, no redrawn part."""
    line = _ANSI.sub("", line).rstrip("\r\n")
    return line.rsplit("\r", 1)[-1].rstrip()


def _is_head(text: str) -> bool:
    stripped = text.lstrip()
    if _NOT_A_TOOL.match(stripped):
        return False
    return bool(_HEAD.match(stripped) or _BECAUSE.match(stripped))


class _Step:
    """One step's blocks so far, and whether the last one is still open."""

    __slots__ = ("blocks", "open", "count")

    def __init__(self) -> None:
        self.blocks: deque[list[str]] = deque(maxlen=_KEPT_BLOCKS)
        self.open = False
        self.count = 0  # every kept-worthy line seen, stored or not


class StepWords:
    """The cause lines of every step of one build, as its output streams in.

    `add(step, line)` for each line a step printed (step: any key that names it, a BuildKit vertex or
    a classic step number); `causes(step)` for the lines the error quotes."""

    def __init__(self) -> None:
        self._steps: dict[str, _Step] = {}

    def add(self, step: str, line: str) -> None:
        text = _APT_PROGRESS.sub("", _clean(line), count=1)
        state = self._steps.setdefault(step, _Step())
        if not text:
            return  # a blank line keeps a block open: uv separates its paragraphs with one
        if _is_head(text) and not (state.open and text[:1].isspace()):
            state.blocks.append([text])
            state.open = True
            state.count += 1
        elif state.open and text[:1].isspace():
            block = state.blocks[-1]
            if len(block) < _KEPT_LINES:
                block.append(text)
            state.count += 1
        else:
            state.open = False

    def causes(self, step: str | None) -> Causes:
        """The failed step's cause lines: the last blocks that fit in MAX_LINES (a block longer than
        that keeps its first lines), each dedented, cut to MAX_WIDTH and redacted."""
        state = self._steps.get(step) if step is not None else None
        if state is None or not state.blocks:
            return Causes(lines=(), more=0)
        chosen: list[list[str]] = []
        room = MAX_LINES
        for block in reversed(state.blocks):
            if len(block) <= room:
                chosen.insert(0, block)
                room -= len(block)
            elif not chosen:
                chosen.insert(0, block[:room])
                room = 0
            else:
                break
            if room == 0:
                break
        lines = tuple(_cut(redact(line)) for block in chosen for line in _dedent(block))
        return Causes(lines=lines, more=max(state.count - len(lines), 0))


def _dedent(block: list[str]) -> list[str]:
    """A block without the indentation all its lines share (uv 0.5 indents its whole explanation)."""
    indent = min(len(line) - len(line.lstrip()) for line in block)
    return [line[indent:] for line in block]


def _cut(line: str) -> str:
    return line if len(line) <= MAX_WIDTH else line[: MAX_WIDTH - 1] + "…"
