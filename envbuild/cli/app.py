"""`envbuild`'s entry point: parse, dispatch through the handler table, turn errors into exit codes.

An EnvbuildError ends the command with its message and exit code (errors.py); anything else is a
bug, reported in one line without a traceback unless ENVBUILD_DEBUG is set. Both are redacted: an
error may quote what the Engine or a registry said, and that may carry credentials. SIGINT, SIGTERM
and SIGHUP interrupt the command alike (_util/signals.py): its cleanup runs, and it exits 128 + the
signal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from envbuild._util.signals import signals_interrupt
from envbuild.cli.commands import HANDLERS
from envbuild.cli.parser import build_parser
from envbuild.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, EnvbuildError


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, parsers = build_parser(argv)
    args = parser.parse_args(argv)
    handler = HANDLERS.get(getattr(args, "command_path", ""))
    if handler is None:  # no command, or a group (ci, matrix) without its subcommand: misuse, so
        # the help goes to stderr and the exit code is 2, as argparse does for a missing argument
        parsers[getattr(args, "command_path", "")].print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with signals_interrupt(), _engine_of(args):
            return handler(args)
    except EnvbuildError as exc:
        from envbuild._util.redact import redact  # only on the way out: resolve pays nothing for it

        sys.stderr.write(redact(exc.render()) + "\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:  # signals_interrupt's Interrupted: SIGINT, SIGTERM or SIGHUP
        sys.stderr.write(f"{exc or 'interrupted'}\n")
        return getattr(exc, "exit_code", 130)
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: still no traceback unless asked for
        if os.environ.get("ENVBUILD_DEBUG"):
            raise
        from envbuild._util.redact import redact

        sys.stderr.write(
            f"error: internal error: {type(exc).__name__}: {redact(str(exc))}\n"
            "  fix: this is a bug in envbuild; rerun with ENVBUILD_DEBUG=1 and report "
            "the traceback\n"
        )
        return EXIT_FAILURE


@contextlib.contextmanager
def _engine_of(args: argparse.Namespace) -> Iterator[None]:
    """The container engine a command with --engine uses, for the command: --engine, else
    ENVBUILD_ENGINE, else docker (`build` then layers envbuild.toml's [build] engine in too). A command
    without the flag never imports the engine."""
    if not hasattr(args, "engine"):
        yield
        return
    from envbuild.engine import selected
    from envbuild.stages.settings import layered, rule_named

    name, _ = layered(rule_named("engine"), args.engine, os.environ, None)
    with selected(str(name)):
        yield


def console() -> None:
    """The `envbuild` console script and `python -m envbuild`: main(), then the process exits.

    When rattler (the conda solver: Rust, with tokio threads) was loaded, the process ends with
    os._exit once stdout and stderr are flushed: its runtime's threads can crash the interpreter's
    finalization (SIGSEGV, "PyGILState_Release: thread state ... must be current"), which hit about
    one `envbuild lock --check` of a conda target in 20 after its work was done and its output
    written. Every file envbuild writes is written atomically before main() returns.
    """
    code = main()
    if "rattler" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
