"""The one rule for a test whose host lacks something it needs: fail in CI, skip elsewhere.

.ci/run sets ENVBUILD_REQUIRE_DOCKER=1 and installs every tool and service the tests use, so in CI a
missing capability is a broken CI, never a pass; on a developer's machine without, say, Slurm or a
Python 3.8, the test says what it did not check and skips.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRED = "ENVBUILD_REQUIRE_DOCKER"  # set to 1 by .ci/run


def missing(why: str) -> NoReturn:
    """Fail the calling test in CI, skip it elsewhere, saying `why`."""
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(why)
    pytest.skip(f"{why} (set {REQUIRED}=1 to fail instead)")
