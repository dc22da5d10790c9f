"""Every error envbuild ends a command with, and the exit code each one means.

Exit codes are a contract with CI scripts: 0 ok, 1 failure, 2 usage or bad input, 3 no compatible
stack (EXIT_MEANINGS says each in full). The command line turns an EnvbuildError into its message
(what is wrong, what is accepted, how to fix it) and its exit code; nothing ends in a traceback. One
list, so a reader sees every way a command can fail and what a script will see. A command ended by
SIGINT, SIGTERM or SIGHUP exits 128 + the signal's number once its cleanup is done (130, 143, 129:
_util/signals.py)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NO_STACK = 3
# Not envbuild's own exit: the status the preflight guard of an image envbuild built ends a program
# with on a node that image cannot run on (envbuild.preflight's STOP_STATUS, which runs in the image
# without envbuild; sysexits' EX_CONFIG). verify, and the Slurm and Kubernetes jobs `ci` writes, read it.
EXIT_PREFLIGHT_STOP = 78
# A command ended by a signal exits this plus the signal's number (_util/signals.py: SIGNALS).
EXIT_SIGNAL_BASE = 128

# What each exit status tells a script, kept beside the constants (docs: reference/exit-codes.md is
# generated from it, and a test holds it to the constants above).
EXIT_MEANINGS = {
    EXIT_OK: "Success: `resolve` found a stack, `verify` and `smoke` passed every gate, `doctor` failed "
    "no check, `lock --check` found the lock current, `matrix check` found the data valid.",
    EXIT_FAILURE: "A stage failed: a build, a smoke gate, the audit (a GPU with no kernel image in a "
    "library the framework loads), a push, a fetch or a hash; `lock --check` found the lock out of date; "
    "`doctor` failed a check; `attest` failed a check; `matrix check` found problems in the data; or an "
    "internal error (a bug: rerun with ENVBUILD_DEBUG=1).",
    EXIT_USAGE: "Bad input, nothing done: a flag or spec value that is not accepted, an unknown GPU, a "
    "spec, lock or matrix that does not read, a missing file; also a command or flag argparse refuses. "
    "The message names the flag, file or field, what is accepted, and a fix.",
    EXIT_NO_STACK: "No compatible stack: the driver, the GPUs and the constraints leave no candidate "
    "(`resolve`, and `render`, `lock`, `build` for a target). The message lists the closest misses and "
    "what to relax.",
    EXIT_PREFLIGHT_STOP: "The image's preflight guard stopped a Python program before it ran, on a "
    "node the image cannot run on (a driver too old for its CUDA, a GPU it has no kernels for), with "
    "ENVBUILD_PREFLIGHT=strict, the default. Programs in images envbuild built exit with it, and so do "
    "the Slurm and Kubernetes verify jobs `envbuild ci` writes; `envbuild verify` reports it as the "
    "guard's refusal and exits 1.",
    EXIT_SIGNAL_BASE: "Ended by a signal, once its cleanup ran (a smoke container removed, a record "
    "marked interrupted): 128 plus the signal's number, as a shell reports a process the signal killed.",
}


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
