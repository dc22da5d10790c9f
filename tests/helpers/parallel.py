"""What may run side by side under pytest-xdist (`make test` runs `pytest -n auto --dist loadgroup`).

- **Two engine groups.** The tests in tests/engine/ share one Docker Engine, so they run in two units
  of work, each on one worker in order, while the other workers take tests/unit and
  tests/integration one test at a time:
  - "engine": every module that runs envbuild's smoke step or image inventory through the Engine
    (`build`, `verify`, `verify_image`, `read_inventory`) or looks at the Engine as a whole. Their
    assertions count the Engine's smoke containers (`label=io.envbuild.role=smoke`) and, in the
    attest end-to-end test, its inventory containers over a time window (the only Engine-wide
    queries in the tests), so no other such container may exist meanwhile.
  - "engine-apart" (APART_MODULES): modules whose Engine use is confined to images, containers and
    repositories of their own and that start no envbuild smoke or inventory container: the one-node
    Slurm cluster's end-to-end test (its only user), the Charliecloud and HPC runtimes (ch-run, not
    Docker), the rendered-Dockerfile builds (plain `docker run`), and the modules that only
    `docker build` and run images of their own, push to and promote in registries, or ask doctor;
    and the Podman module (PODMAN_MODULES), whose smoke containers are Podman's, not the Engine's.
    tests/unit/test_parallel.py checks they run no smoke step and no inventory through the Engine.
    They are the group the worker that finishes tests/unit and tests/integration early can take,
    about two fifths of the engine tests' time, so that neither worker waits for the other.
  Tests outside tests/engine/ may use the registry on 127.0.0.1:5000, each in a repository of its
  own. The `docker` marker is only allowed in tests/engine/ (test_parallel.py), so the folder is the
  whole rule. Each worker builds its own session images, under tags of its own (docker.TORCH_IMAGE).
- **Why a scheduler of our own.** xdist's loadgroup reads `xdist_group` marks by rewriting each
  test's node id in the workers, which pytest 9.2 no longer honours: the marks are silently ignored
  and the engine tests spread over every worker (pytest-dev/pytest-xdist#1386, open). The scheduler
  below, which `--dist loadgroup` selects through xdist's pytest_xdist_make_scheduler hook
  (tests/helpers/suite.py), groups by the node id in the controller instead, and still honours an
  `@group` suffix should xdist add one again. bench/ci_time.py fails CI when a group's tests ran on
  two workers.
- **arm64 last.** The engine group's modules that need the arm64 base run at its end: .ci/run builds
  that base in the background (its debootstrap runs under QEMU for minutes) while the tests start.
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
APART_GROUP = "engine-apart"
APART_MODULES = frozenset(
    {
        # the long ones: Slurm, the HPC runtimes and the rendered-Dockerfile builds
        "test_render_docker.py",
        "test_runtime_charliecloud.py",
        "test_runtime_hpc.py",
        "test_slurm_e2e.py",
        # plain `docker build`s of their own, registries and promotion by digest, doctor
        "test_cuda_layer.py",
        "test_doctor_engine.py",
        "test_doctor_no_gpu.py",
        "test_engine.py",
        "test_lock_engine.py",
        "test_referrers.py",
        "test_registry.py",
        "test_registry_credentials.py",
        "test_registry_index.py",
        "test_registry_promote.py",
        "test_runtime_identify.py",
        "test_apt_mirror.py",
        # images, layers and bundles of their own, read through the Engine's storage or a registry
        # (audit and vendor read no container): they balance the two groups' times (issue 38)
        "test_audit_cross_layer_links.py",
        "test_audit_duplicates_image.py",
        "test_container_engine.py",
        "test_lock_mirror_registry.py",
        "test_vendor.py",
    }
)
# modules whose every envbuild command runs on Podman (a module-wide ENVBUILD_ENGINE=podman, which
# tests/unit/test_parallel.py checks): their smoke and build containers are Podman's, in Podman's own
# storage, so the Docker Engine's smoke-container counts of the engine group never see them
PODMAN_MODULES = frozenset({"test_podman.py"})
APART_MODULES = APART_MODULES | PODMAN_MODULES
ENGINE_TESTS = REPO / "tests" / "engine"
ENGINE_PREFIX = "tests/engine/"  # the same folder, as node ids begin (rootdir-relative)
ARM64_BASE_FIXTURE = "bookworm_arm64_image"


def scope_of(nodeid: str) -> str | None:
    """The group a node id belongs to (ENGINE_GROUP or APART_GROUP), or None for a test that is a unit
    of work of its own."""
    if not nodeid.startswith(ENGINE_PREFIX):
        return None
    module = nodeid[len(ENGINE_PREFIX) :].split("::", 1)[0]
    return APART_GROUP if module in APART_MODULES else ENGINE_GROUP


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
