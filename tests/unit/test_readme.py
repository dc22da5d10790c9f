"""The scripts hard-code no Debian mirror.

This file used to hold README.md's per-command synopses and its environment-variable table to the
code (issue 17, item 16). Issue 39 moves both out of the README, which points into the docs
site instead: the flags are checked in the generated command reference (test_docs_reference.py), the
variables in their registry (test_envvars.py)."""

from __future__ import annotations

import pytest

from tests.helpers.paths import REPO


@pytest.mark.parametrize("path", [".ci/run", "tests/helpers/docker.py"])
def test_debootstrap_uses_its_default_mirror(path: str) -> None:
    """debootstrap picks its own default mirror: a hard-coded host breaks behind a local mirror."""
    text = (REPO / path).read_text()
    calls = [line for line in text.splitlines() if "debootstrap" in line and "bookworm" in line]
    assert calls, f"{path} no longer runs debootstrap: update this test"
    assert [line for line in calls if "http" in line] == []
