"""Which tests a selection collects, asked of pytest itself in a subprocess, as a user selecting tests
would: the marker rules (test_markers.py, test_parallel.py) are checked against what pytest sees."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.paths import REPO


def collected(expression: str, *paths: str) -> list[str]:
    """The test ids `pytest --collect-only -m expression` selects in `paths`."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            expression,
            *paths,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]  # 5: none selected
    return [line for line in done.stdout.splitlines() if "::" in line]
