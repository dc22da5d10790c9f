"""Children that start with the signal handling a terminal gives them, whoever started the tests.

A shell starts a background job with SIGINT ignored, and `nohup` ignores SIGHUP; both are inherited
through `make test` and pytest into every child. envbuild keeps an ignored signal ignored (as `nohup`
users expect), and Python never installs its Ctrl-C handler when SIGINT starts ignored, so a test
that sends one of these to a child it started checks nothing about envbuild unless the child starts
from the default dispositions. Popen's `restore_signals` covers only SIGPIPE, SIGXFZ and SIGXFSZ.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # the signals the tests send


def default_signals(*ignored: signal.Signals) -> Callable[[], None]:
    """A Popen preexec_fn: SENT back to their defaults in the child, except those in `ignored`, which
    it ignores (a test of what envbuild does under `nohup`)."""

    def reset() -> None:
        for number in SENT:
            signal.signal(number, signal.SIG_IGN if number in ignored else signal.SIG_DFL)

    return reset
