"""What a test could not do on this host and did instead, said in pytest's terminal summary (by
tests/conftest.py's pytest_terminal_summary): a test that checks the error path because a runtime is
missing passes, but nobody should read that pass as "the real run works"."""

from __future__ import annotations

NOT_RUN: list[str] = []


def not_run(line: str) -> None:
    """Add `line` ("apptainer: not on PATH, the real run was not done") to the summary, once."""
    if line not in NOT_RUN:
        NOT_RUN.append(line)
