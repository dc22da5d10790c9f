"""SIGTERM and SIGHUP end a command the way Ctrl-C does, so its cleanup runs.

CI cancellation and Kubernetes send SIGTERM, a closed terminal SIGHUP; Python's default for both is to
die on the spot, skipping every `finally` (a smoke container left running, a record left at
"started"). While `signals_interrupt()` is active, SIGINT, SIGTERM and SIGHUP raise `Interrupted` in the
main thread, a KeyboardInterrupt, so everything that already cleans up after Ctrl-C (verify's container
removal, build's untag and "interrupted" record) does so for all three.

Only the first signal raises. Later ones are ignored until the command has ended, so a second signal
cannot cut the cleanup short: GitHub Actions sends SIGINT, then SIGTERM a few seconds later, then
SIGKILL. The cleanup is bounded by its own timeouts instead (each Engine call it makes has one).
A signal that was ignored when envbuild started (nohup) stays ignored.
"""

from __future__ import annotations

import signal

from envbuild.errors import EXIT_SIGNAL_BASE

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A command ended by a signal; `exit_code` is the shell's 128 + the signal's number
    (130 SIGINT, 143 SIGTERM, 129 SIGHUP), what a parent sees from a process the signal killed."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.exit_code = EXIT_SIGNAL_BASE + signum
        super().__init__(f"interrupted by {self.name}")


class signals_interrupt:  # lower case: used as `with signals_interrupt():`, like a function
    """Raise Interrupted on the first SIGINT, SIGTERM or SIGHUP while the block runs; ignore later ones
    until it ends; then put the previous handlers back. Outside the main thread (where Python cannot
    install handlers) it does nothing. A class, not contextlib: every command enters it, and
    `envbuild resolve` counts its milliseconds."""

    def __init__(self) -> None:
        self.fired: list[int] = []
        self.previous: dict[int, object] = {}

    def handler(self, signum: int, frame: object) -> None:
        if self.fired:
            return  # the first one is being handled: let its cleanup finish
        self.fired.append(signum)
        raise Interrupted(signum)

    def __enter__(self) -> None:
        for signum in SIGNALS:
            before = signal.getsignal(signum)
            if before is signal.SIG_IGN:
                continue
            try:
                signal.signal(signum, self.handler)
            except ValueError:  # not the main thread
                break
            self.previous[signum] = before

    def __exit__(self, *exc: object) -> None:
        for signum, before in self.previous.items():
            signal.signal(signum, before)  # type: ignore[arg-type]


def hold() -> set[int]:
    """Hold SIGINT, SIGTERM and SIGHUP (block them) while a child process is started; returns the
    mask to put back with `release`.

    subprocess.Popen() forks, then waits in the parent for the child's exec. A signal that lands in
    that wait raises Interrupted out of Popen() itself: the child runs on, and there is no Popen to kill
    it by. Held, the signal waits until `release`, which the caller calls first thing inside the try
    whose `except` kills the child. The child must start with the mask put back: pass
    `preexec_fn=lambda: release(mask)` (a blocked mask survives exec)."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def release(mask: set[int]) -> None:
    """Put back the mask `hold` returned; a signal held meanwhile is raised now (Interrupted)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
