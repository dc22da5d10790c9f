"""Shared fixtures: the bundled matrix, a tiny hand-made matrix, and the `docker` marker policy."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envbuild.matrix.load import default_matrix_dir, load_matrix
from envbuild.matrix.model import Matrix

REPO = Path(__file__).resolve().parent.parent
MATRIX_DIR = REPO / "matrix"


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never read or write the developer's ~/.cache from tests."""
    os.environ["ENVBUILD_CACHE_DIR"] = str(tmp_path_factory.mktemp("envbuild-cache"))


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    assert Path(default_matrix_dir()).resolve() == MATRIX_DIR.resolve()
    return load_matrix(MATRIX_DIR)


@pytest.fixture
def matrix_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled matrix, for tests that break it on purpose."""
    target = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, target)
    return target


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Docker tests skip without an engine, unless ENVBUILD_REQUIRE_DOCKER=1 (CI) makes that fail."""
    if not any(item.get_closest_marker("docker") for item in items):
        return
    if os.environ.get("ENVBUILD_REQUIRE_DOCKER") == "1":
        return
    if _docker_available():
        return
    skip = pytest.mark.skip(reason="no Docker Engine reachable (set ENVBUILD_REQUIRE_DOCKER=1 to fail)")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


def _docker_available() -> bool:
    socket = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return socket.startswith("unix://") and Path(socket[len("unix://") :]).exists()
