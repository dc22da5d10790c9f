"""The `pypi` marker (issue 23, item 5): every test that downloads from PyPI carries it, through a
PyPI fixture (tests/conftest.py's PYPI_FIXTURES) or its module's pytestmark, and a test that only
builds its wheels locally does not. Checked by collecting with -m, as a user selecting tests would."""

from __future__ import annotations

import pytest

from tests.helpers.collect import collected
from tests.helpers.pypi import pypi_unreachable

NEEDS_PYPI = [
    "tests/integration/test_lock.py",  # the framework_wheels fixture, through indexes
    "tests/integration/test_lock_noop.py",
    "tests/integration/test_pins_metadata.py",  # PyPI's METADATA itself
    "tests/integration/test_audit_wheel.py",  # a wheel downloaded from PyPI
    "tests/integration/test_refresh_audit.py",
    "tests/engine/test_lock_engine.py",
    "tests/engine/test_audit_image.py",
]
LOCAL_ONLY = ["tests/integration/test_pyindex.py", "tests/unit/test_render_installer.py"]


def test_every_test_that_downloads_from_pypi_is_marked() -> None:
    assert collected("not pypi", *NEEDS_PYPI) == []
    marked = collected("pypi", *NEEDS_PYPI)
    assert {line.split("::")[0] for line in marked} == set(NEEDS_PYPI)


@pytest.mark.parametrize("path", LOCAL_ONLY)
def test_tests_with_local_wheels_only_are_not_marked(path: str) -> None:
    assert collected("pypi", path) == []
    assert collected("not pypi", path) != []


def test_pypi_unreachable_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one rule every PyPI download follows (tests/helpers/pypi.py)."""
    monkeypatch.delenv("ENVBUILD_REQUIRE_DOCKER", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"PyPI unreachable \(no route\)"):
        pypi_unreachable("no route")
    monkeypatch.setenv("ENVBUILD_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="PyPI is needed here and no route"):
        pypi_unreachable("no route")


def test_a_missing_capability_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule every other host-dependent test follows (tests/helpers/capability.py): the Slurm and
    Charliecloud tools, a Python 3.8, a tmpfs mount, an x86_64 host for the QEMU tests."""
    from tests.helpers.capability import missing

    monkeypatch.delenv("ENVBUILD_REQUIRE_DOCKER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no sbatch"):
        missing("no sbatch")
    monkeypatch.setenv("ENVBUILD_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="no sbatch"):
        missing("no sbatch")
