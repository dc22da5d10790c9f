"""reference/exit-codes.md: every exit status envbuild (and the guard in its images) ends with, from the
constants in envbuild/errors.py and the meaning kept beside each (EXIT_MEANINGS)."""

from __future__ import annotations

import signal

from docsgen import markdown as md


def constants() -> dict[int, str]:
    """Exit status -> the name of its constant in envbuild.errors."""
    from envbuild import errors

    return {
        value: name
        for name, value in vars(errors).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }


def page() -> str:
    from envbuild import errors
    from envbuild._util.signals import SIGNALS

    names = constants()
    rows = []
    for code, meaning in errors.EXIT_MEANINGS.items():
        if code == errors.EXIT_SIGNAL_BASE:
            continue
        rows.append((md.code(code), md.code(names[code]), md.text(meaning)))
    for signum in sorted(SIGNALS, key=lambda s: errors.EXIT_SIGNAL_BASE + s):
        name = signal.Signals(signum).name
        rows.append(
            (
                md.code(errors.EXIT_SIGNAL_BASE + signum),
                md.code(f"{names[errors.EXIT_SIGNAL_BASE]} + {name}"),
                md.text(errors.EXIT_MEANINGS[errors.EXIT_SIGNAL_BASE].replace("a signal", name, 1)),
            )
        )
    return (
        "# Exit codes\n\n"
        "What every `envbuild` command's exit status means, generated from the constants in "
        "`envbuild/errors.py` and the meaning kept beside each. A script can rely on them; "
        "several commands say in their description ([Commands](cli.md)) which of them they use. Whatever the "
        "status, the error itself is one message on stderr, with a `fix:` line, never a traceback.\n\n"
        + md.table(("status", "constant", "what it means"), rows)
        + "\n`78` is not a status `envbuild` itself ends with: the preflight guard in every image envbuild "
        "builds stops a Python program with it, before the program runs, on a node the image cannot run on "
        "(see [Verification and the preflight guard](../concepts/verification.md)).\n"
    )
