"""Progress lines (issue 18, item 4): the format of a finished step, the live line a terminal gets
and its rewrite, and silence for `--quiet`. The clock is a counter, so the elapsed times are exact
without any timing."""

from __future__ import annotations

import io
import itertools

from envbuild._util.progress import ERASE, Progress


def ticking() -> itertools.count:
    return itertools.count(0.0, 1.25)


def test_plain_lines_are_one_per_finished_step_with_the_elapsed_time() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False, clock=ticking().__next__)
    progress.begin("target default: framework layer").done("torch 2.13.0, 12 packages")
    progress.begin("target default: user layer").done("5 packages")
    assert out.getvalue() == (
        "[  1.2s] target default: framework layer (torch 2.13.0, 12 packages)\n"
        "[  2.5s] target default: user layer (5 packages)\n"
    )


def test_a_string_io_is_no_terminal_so_it_gets_plain_lines() -> None:
    out = io.StringIO()
    Progress(out).begin("a").done("b")
    assert "\r" not in out.getvalue() and out.getvalue().endswith("a (b)\n")


def test_live_lines_are_rewritten_in_place_by_the_finished_line() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, clock=ticking().__next__)
    step = progress.begin("target default: framework layer")
    assert out.getvalue() == f"{ERASE}[  1.2s] resolving target default: framework layer..."
    step.done("torch 2.13.0, 12 packages")
    assert out.getvalue() == (
        f"{ERASE}[  1.2s] resolving target default: framework layer..."
        f"{ERASE}[  2.5s] target default: framework layer (torch 2.13.0, 12 packages)\n"
    )


def test_a_step_that_never_finished_is_erased_so_the_error_starts_a_clean_line() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, clock=ticking().__next__)
    progress.begin("target default: user layer", "pinning the base image of target default")
    assert out.getvalue().endswith("] pinning the base image of target default...")
    progress.close()  # the command raised: the error follows on a clean line
    assert out.getvalue().endswith("...\r\x1b[K")
    progress.close()  # nothing left to erase
    assert out.getvalue().count(ERASE) == 2
    plain = io.StringIO()
    quiet_on_failure = Progress(plain, live=False)
    quiet_on_failure.begin("x")
    quiet_on_failure.close()
    assert plain.getvalue() == ""


def test_quiet_writes_nothing() -> None:
    progress = Progress(None, live=True)
    progress.begin("target default: framework layer").done("12 packages")
    assert not progress.live
