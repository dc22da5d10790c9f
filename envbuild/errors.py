"""The few exceptions the CLI turns into exit codes, so no command ever ends in a traceback.

Exit codes are a contract with CI scripts: 0 ok, 1 failure, 2 usage or bad input, 3 no compatible
stack.
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


class UsageError(EnvbuildError):
    """Bad input: a malformed flag value, an unknown GPU, a broken matrix or spec file."""

    exit_code = EXIT_USAGE


class MatrixError(UsageError):
    """The compatibility data does not load or does not validate; names the file and row."""
