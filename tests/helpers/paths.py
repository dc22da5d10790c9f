"""Where the repository's parts are, for tests that read them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MATRIX_DIR = REPO / "matrix"
EXAMPLES = REPO / "examples"
GOLDEN = REPO / "tests" / "golden"
FIXTURES = REPO / "tests" / "fixtures"
