"""Progress lines for a long command: one finished line per step, with the time since the start.

`envbuild lock` spends tens of seconds in uv, layer after layer and target after target. Printing
nothing until the end makes a slow index look like a hang, and a CI log of a timed-out job says
nothing about where the time went. So each step ends with one line on stderr (stdout stays the
command's result, which scripts read):

    [  3.2s] target default: framework layer (torch 2.13.0, 12 packages)

On a terminal, a step also shows a live line while it runs ("resolving target default: framework
layer..."), rewritten in place by its finished line (carriage return and erase-to-end-of-line), so
the screen holds one line per finished step. Elsewhere (a CI log, a file, a pipe) only the finished
lines are written, since a log keeps every rewrite as a line of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

ERASE = "\r\x1b[K"  # back to column 0, then erase to the end of the line


class Progress:
    """Writes step lines to `stream`; `None` writes nothing (`--quiet`). `live`: rewrite a running
    step's line in place (default: when the stream is a terminal)."""

    def __init__(
        self,
        stream: TextIO | None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.live = bool(stream is not None and (stream.isatty() if live is None else live))
        self.clock = clock
        self.started = clock()
        self.pending: Step | None = None  # the step whose live line is on screen

    def stamp(self) -> str:
        """`[  3.2s]`: seconds since the progress began, right-aligned so the lines line up."""
        return f"[{self.clock() - self.started:5.1f}s]"

    def write(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(text)
            self.stream.flush()

    def begin(self, label: str, doing: str | None = None) -> Step:
        """A step named `label`, finished by `Step.done`. On a terminal it shows `DOING...` (by
        default `resolving LABEL...`) until then."""
        self.close()
        step = Step(self, label)
        if self.live:
            self.write(f"{ERASE}{self.stamp()} {doing or 'resolving ' + label}...")
            self.pending = step
        return step

    def close(self) -> None:
        """Erase the live line of a step that never finished (it raised: its error says what failed),
        so the error message starts on a clean line rather than after `resolving ...`."""
        if self.pending is not None:
            self.write(ERASE)
            self.pending = None


class Step:
    """One running step of a Progress."""

    def __init__(self, progress: Progress, label: str) -> None:
        self.progress = progress
        self.label = label

    def done(self, detail: str) -> None:
        """The step's finished line: `[  3.2s] LABEL (DETAIL)`."""
        line = f"{self.progress.stamp()} {self.label} ({detail})\n"
        self.progress.write(ERASE + line if self.progress.live else line)
        self.progress.pending = None


SILENT = Progress(None)
