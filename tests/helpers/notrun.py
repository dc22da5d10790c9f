"""What a test could not do on this host and did instead, said in pytest's terminal summary (by
tests/conftest.py's pytest_terminal_summary): a test that checks the error path because a runtime is
missing passes, but nobody should read that pass as "the real run works".

Under pytest-xdist the test runs in a worker and the summary is written by the controller, so each
line also travels on the report of the test phase that said it (`attach` in the worker, `collect` in
the controller); without xdist both run in one process and `not_run` keeps each line once.
"""

from __future__ import annotations

import pytest

NOT_RUN: list[str] = []
PROPERTY = "envbuild-not-run"  # the report's user_properties key
_attached = 0  # how many of NOT_RUN's lines a report carries already (this process)


def not_run(line: str) -> None:
    """Add `line` ("apptainer: not on PATH, the real run was not done") to the summary, once."""
    if line not in NOT_RUN:
        NOT_RUN.append(line)


def attach(report: pytest.TestReport) -> None:
    """Put the lines said since the last report on `report` (run where the test ran)."""
    global _attached
    report.user_properties.extend((PROPERTY, line) for line in NOT_RUN[_attached:])
    _attached = len(NOT_RUN)


def collect(report: pytest.TestReport) -> None:
    """Take the lines a report carries into this process's summary (run where the summary is)."""
    for name, value in report.user_properties:
        if name == PROPERTY:
            not_run(str(value))
