"""Where the suite's time goes: one JSON line per test phase (setup, call, teardown) with its node id,
outcome, the xdist worker that ran it, its group (parallel.py) and its start and stop times, written
by the process that collects the reports (xdist's controller, or the only process) to the file
ENVBUILD_TEST_TIMES names.
.ci/run sets it; bench/ci_time.py reads the file.

The variable is taken out of the environment when read, so a pytest that a test starts (test_markers
collects in a subprocess) and the xdist workers, started later, write nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.parallel import scope_of

TIMES = "ENVBUILD_TEST_TIMES"
_path: Path | None = None


def start(config: pytest.Config) -> None:
    """Open the timings file afresh when this process writes it (pytest_configure)."""
    global _path
    value = os.environ.pop(TIMES, "")
    # a worker's config carries workerinput; PYTEST_XDIST_WORKER would also be set in a pytest that a
    # test inside a worker starts (tests/unit/test_parallel.py), which does write its own file
    if not value or hasattr(config, "workerinput"):
        return
    _path = Path(value)
    _path.parent.mkdir(parents=True, exist_ok=True)
    _path.write_text("")


def record(report: pytest.TestReport) -> None:
    """One line for `report` (pytest_runtest_logreport)."""
    if _path is None:
        return
    node = getattr(report, "node", None)  # xdist's controller: the worker the report came from
    line = {
        "id": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "worker": node.gateway.id if node is not None else "main",
        "group": scope_of(report.nodeid),
        "start": report.start,
        "stop": report.stop,
    }
    with _path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
