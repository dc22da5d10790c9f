"""Files a test keeps for people to look at (the explorer's screenshot), named in pytest's terminal
summary so a CI log says where they are.

The lines travel as notrun.py's do: under pytest-xdist the test runs in a worker and the summary is
written by the controller, so each path also rides on the report of the test phase that kept it
(`attach` in the worker, `collect` in the controller).
"""

from __future__ import annotations

from pathlib import Path

import pytest

KEPT: list[str] = []
PROPERTY = "envbuild-artifact"  # the report's user_properties key
_attached = 0  # how many of KEPT's lines a report carries already (this process)


def keep(path: Path, what: str) -> None:
    """Name `path` in the summary: "explorer-rtx-4090.png: the explorer filtered to RTX 4090"."""
    line = f"{path}: {what}"
    if line not in KEPT:
        KEPT.append(line)


def attach(report: pytest.TestReport) -> None:
    global _attached
    report.user_properties.extend((PROPERTY, line) for line in KEPT[_attached:])
    _attached = len(KEPT)


def collect(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == PROPERTY and str(value) not in KEPT:
            KEPT.append(str(value))
