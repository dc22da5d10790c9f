"""One deadline for a whole command, shared by every wait inside it.

Per-call timeouts add up: five slow `nvidia-smi` calls at 25 s each kept `envbuild doctor` busy for
125 s. A Deadline is asked before each wait how long that wait may take (its own cap, or what is left
of the whole), so the command as a whole ends on time, and a wait that ran out can tell whether the
command's deadline is what stopped it.
"""

from __future__ import annotations

import time


class DeadlineExceeded(Exception):
    """The command's deadline has passed; the caller reports what finished and what did not run."""


class Deadline:
    """A point in monotonic time, counted from when it is made."""

    __slots__ = ("_end", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._end

    def budget(self, cap: float) -> float:
        """The seconds one wait may take: its own cap, or what is left if less.

        Raises DeadlineExceeded when nothing is left, so no wait starts after the deadline."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded
        return min(cap, left)
