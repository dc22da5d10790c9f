"""The docs site, built once per test run for every test that reads it (`built_site`).

`mkdocs build --strict` from the checkout's mkdocs.yml into a directory of the run's shared temporary
base (parallel.shared_directory), whichever worker asks first; the build's output is kept beside it
so a failing build fails each test that needed the site with MkDocs' own words.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.parallel import shared_directory
from tests.helpers.paths import REPO


def build_site(directory: Path) -> None:
    """`mkdocs build --strict` into `directory`; a failure raises with MkDocs' output."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(directory)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the theme's banner about its successor
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0:
        raise AssertionError(
            f"mkdocs build --strict failed ({built.returncode}):\n{built.stdout}{built.stderr}"
        )


def site(factory: pytest.TempPathFactory) -> Path:
    """The built site's directory (index.html at its top), built once per run."""
    return shared_directory(factory, "docs-site", build_site)
