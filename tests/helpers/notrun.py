"""What a test could not do on this host and did instead, said in pytest's terminal summary: a test
that checks the error path because a runtime is missing passes, but nobody should read that pass as
"the real run works"."""

from __future__ import annotations

from tests.helpers.summary import SummarySection

NOT_RUN = SummarySection(title="not run on this host", property="envbuild-not-run")


def not_run(line: str) -> None:
    """Add `line` ("apptainer: not on PATH, the real run was not done") to the summary, once."""
    NOT_RUN.add(line)
