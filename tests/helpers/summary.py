"""A section of pytest's terminal summary that tests add lines to (tests/helpers/suite.py writes it).

Under pytest-xdist a test runs in a worker, while the summary is written by the controller, so each
line also travels on the report of the test phase that said it: `attach` runs in the worker, `collect`
in the controller. Without xdist both run in one process, and `add` keeps each line once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest


@dataclass(kw_only=True)
class SummarySection:
    """The lines of one section, in the order they were first said."""

    title: str
    property: str  # the key the lines travel under in a report's user_properties
    lines: list[str] = field(default_factory=list)
    _attached: int = 0  # how many of the lines a report of this process carries already

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)

    def attach(self, report: pytest.TestReport) -> None:
        """Put the lines said since the last report on `report` (run where the test ran)."""
        report.user_properties.extend((self.property, line) for line in self.lines[self._attached :])
        self._attached = len(self.lines)

    def collect(self, report: pytest.TestReport) -> None:
        """Take the lines a report carries into this process's summary (run where the summary is)."""
        for name, value in report.user_properties:
            if name == self.property:
                self.add(str(value))

    def write(self, terminalreporter) -> None:
        if self.lines:
            terminalreporter.section(self.title)
            for line in self.lines:
                terminalreporter.write_line(line)
