"""The hooks for the suite as a whole, which tests/conftest.py takes in by name: how it is split over
pytest-xdist's workers (parallel.py), what each test phase took (timings.py), and what passing tests
did not run here (notrun.py). They live apart from the conftest so that a small suite of its own can
use the same hooks (tests/unit/test_parallel.py runs one under xdist)."""

from __future__ import annotations

import pytest

from tests.helpers import artifacts, notrun, parallel, timings

SECTIONS = (notrun.NOT_RUN, artifacts.KEPT)  # in the summary's order


def pytest_configure(config: pytest.Config) -> None:
    timings.start(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` (make test): the engine tests as one unit of work (parallel.py)."""
    return parallel.make_scheduler(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A worker's "not run here" lines and kept files travel to the controller on the test's report."""
    report = yield
    for section in SECTIONS:
        section.attach(report)
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for section in SECTIONS:
        section.collect(report)
    timings.record(report)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Say what passing tests did not do here (a missing runtime's real run), and where the files
    they kept are (the explorer's screenshot)."""
    for section in SECTIONS:
        section.write(terminalreporter)
