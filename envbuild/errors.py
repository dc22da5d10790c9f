"""Every error envbuild ends a command with, and the exit code each one means.

Exit codes are a contract with CI scripts: 0 ok, 1 failure, 2 usage or bad input, 3 no compatible
stack. The command line turns an EnvbuildError into its message (what is wrong, what is accepted,
how to fix it) and its exit code; nothing ends in a traceback. One list, so a reader sees every way
a command can fail and what a script will see. A command ended by SIGINT, SIGTERM or SIGHUP exits
128 + the signal's number once its cleanup is done (130, 143, 129: _util/signals.py).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NO_STACK = 3


class EnvbuildError(Exception):
    """An error with a message fit for a user: what is wrong, what is accepted, how to fix it."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


# --- exit 2: the input is wrong ------------------------------------------------------------------


class UsageError(EnvbuildError):
    """Bad input: a malformed flag value, an unknown GPU, a broken matrix or spec file."""

    exit_code = EXIT_USAGE


class MatrixError(UsageError):
    """The compatibility data does not load or does not validate; names the file and row."""


# --- exit 3: nothing fits ------------------------------------------------------------------------


class NoStackError(UsageError):
    """A spec target's [stack] constraints leave no stack the driver runs (render, lock, build)."""

    exit_code = EXIT_NO_STACK


# --- exit 1: a stage failed ----------------------------------------------------------------------


class LockError(EnvbuildError):
    """The lock is missing, malformed or out of date: a CI failure."""


class BuildError(EnvbuildError):
    """A build that failed (or could not start): names the failing step; the fix points at the log."""


class VerifyError(EnvbuildError):
    """The smoke step could not run, or ran but produced no usable report."""


class PromoteError(EnvbuildError):
    """The image could not be promoted: not verified, the label build failed, or a push failed."""


class NotFound(EnvbuildError):
    """HTTP 404 from an upstream index or tag list: "this does not exist" is an answer, not a failure."""
