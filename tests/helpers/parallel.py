"""What may run side by side under pytest-xdist (`make test` runs `pytest -n auto --dist loadgroup`).

- **The engine group.** Every test in tests/engine/ shares one Docker Engine, and some also the
  one-node Slurm cluster: they count the Engine's smoke containers, remove images by tag and time
  their jobs on the node's two CPUs. They form one unit of work that one worker runs in order, while
  the other workers take tests/unit and tests/integration one test at a time. Tests outside the
  group may use the registry on 127.0.0.1:5000, each in a repository of its own. The `docker` marker
  is only allowed in tests/engine/ (tests/unit/test_parallel.py), so the folder is the whole rule.
- **Why a scheduler of our own.** xdist's loadgroup reads `xdist_group` marks by rewriting each
  test's node id in the workers, which pytest 9.2 no longer honours: the marks are silently ignored
  and the engine tests spread over every worker (pytest-dev/pytest-xdist#1386, open). The scheduler
  below, which `--dist loadgroup` selects through xdist's pytest_xdist_make_scheduler hook
  (tests/conftest.py), groups by the node id's folder in the controller instead, and still honours
  an `@group` suffix should xdist add one again.
- **arm64 last.** The group's modules that need the arm64 base run at its end: .ci/run builds that
  base in the background (its debootstrap runs under QEMU for minutes) while the tests start.
- **Shared downloads.** A session fixture that downloads (the lock tests' torch closure) would
  otherwise run once per worker: `shared_directory` fills a directory once for the whole run, under a
  file lock in the base temporary directory the workers share.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ENGINE_GROUP = "engine"
ENGINE_TESTS = REPO / "tests" / "engine"
ENGINE_PREFIX = "tests/engine/"  # the same folder, as node ids begin (rootdir-relative)
ARM64_BASE_FIXTURE = "bookworm_arm64_image"


def scope_of(nodeid: str) -> str | None:
    """The unit of work a node id belongs to when it is not its own: the engine group."""
    return ENGINE_GROUP if nodeid.startswith(ENGINE_PREFIX) else None


def make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's loadgroup scheduling with `scope_of` as the rule (see the module docstring)."""
    from xdist.scheduler import LoadGroupScheduling

    class EngineGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            marked = super()._split_scope(nodeid)  # an @group suffix, if xdist wrote one
            return marked if marked != nodeid else scope_of(nodeid) or nodeid

    return EngineGroupScheduling(config, log)


def run_arm64_modules_last(items: list[pytest.Item]) -> None:
    """Move the engine modules that need the arm64 base to the end (a stable sort: every other test
    keeps its place, and each module stays together)."""
    late = {
        item.path
        for item in items
        if item.path.is_relative_to(ENGINE_TESTS) and ARM64_BASE_FIXTURE in getattr(item, "fixturenames", ())
    }
    items.sort(key=lambda item: item.path in late)


def shared_directory(factory: pytest.TempPathFactory, name: str, fill: Callable[[Path], object]) -> Path:
    """The directory `name` under the run's base temporary directory, filled by `fill(directory)` once
    per test run, whichever worker asks first (`fill_once`)."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's base directory, above each worker's popen-gwN
    return fill_once(root, name, fill)


def fill_once(root: Path, name: str, fill: Callable[[Path], object]) -> Path:
    """root/name, filled by `fill(directory)` unless an earlier call completed it: the first process to
    get here fills it while the others wait on the lock; a fill that raised leaves nothing behind, so
    the next one tries again (and fails or skips the same way)."""
    directory = root / name
    complete = root / f"{name}.complete"  # beside it: the directory may be served as an index
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not complete.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            try:
                fill(directory)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
            complete.touch()
    return directory
