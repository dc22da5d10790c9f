"""Fixtures every test directory shares: the matrix, the Docker Engine's base image and wheelhouse,
the registry on loopback, and the `docker` marker policy.

tests/unit/ needs none of the services; tests/integration/ runs real tools (uv, pip, the frameworks,
check-jsonschema, hadolint) against servers on loopback; tests/engine/ needs a Docker Engine and a
registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex, build_wheel, download_for_target, download_uv_for_target
from envbuild.matrix.load import default_matrix_dir, load_matrix
from envbuild.matrix.model import Matrix
from tests.helpers import cudastack, parallel
from tests.helpers.capability import missing
from tests.helpers.docker import docker, make_bookworm_arm64_image, make_bookworm_image
from tests.helpers.minimatrix import write_minimatrix
from tests.helpers.nvsmi import install_fake_smi
from tests.helpers.parallel import shared_directory
from tests.helpers.paths import MATRIX_DIR
from tests.helpers.pypi import pypi_unreachable
from tests.helpers.registry import answers, start_registry, stop
from tests.helpers.specs import TWO_TARGETS
from tests.helpers.suite import (  # noqa: F401 (hooks pytest finds by name)
    pytest_configure,
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_terminal_summary,
    pytest_xdist_make_scheduler,
)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never read or write the developer's ~/.cache from tests."""
    os.environ["ENVBUILD_CACHE_DIR"] = str(tmp_path_factory.mktemp("envbuild-cache"))


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    assert Path(default_matrix_dir()).resolve() == MATRIX_DIR.resolve()
    return load_matrix(MATRIX_DIR)


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    """The small test matrix (tests/helpers/minimatrix.py): rules, not data."""
    return load_matrix(write_minimatrix(tmp_path_factory.mktemp("mini")))


@pytest.fixture
def matrix_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled matrix, for tests that break it on purpose."""
    target = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, target)
    return target


@pytest.fixture
def two_targets(tmp_path: Path) -> Path:
    """A spec with two [[target]]s, one of them named with a dot (l4.infer)."""
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS)
    return path


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The fake nvidia-smi on PATH; call the fixture's value with a capture's file name to load it."""
    return install_fake_smi(tmp_path, monkeypatch)


# --- Docker Engine and registry ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def bookworm_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_bookworm_image(tmp_path_factory.mktemp("bookworm"))


@pytest.fixture(scope="session")
def bookworm_arm64_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """envbuild-test/bookworm-arm64: a linux/arm64 bookworm with python3, built once (.ci/run does it
    first), for the emulated build and as a wrong-platform image on an x86_64 host."""
    return make_bookworm_arm64_image(tmp_path_factory.mktemp("bookworm-arm64"))


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.13.0, six 1.16.0 and six 1.17.0 for the test images' Python 3.11, from `pip download`,
    and the uv wheel the images install with."""
    prepared = os.environ.get("ENVBUILD_TEST_WHEELHOUSE")  # fetched once by .ci/run
    if prepared and all(
        any(Path(prepared).glob(pattern)) for pattern in ("torch-2.13.0*.whl", "six-1.17.0*", "uv-*.whl")
    ):
        return Path(prepared)

    def fill(directory: Path) -> None:
        download_for_target(directory, "torch==2.13.0", "six==1.16.0")
        download_uv_for_target(download_for_target(directory, "six==1.17.0", no_deps=True))

    try:
        return shared_directory(tmp_path_factory, "wheelhouse", fill)
    except subprocess.CalledProcessError as exc:
        pypi_unreachable(f"pip download for the wheelhouse exited {exc.returncode}")


def jax_wheelhouse(factory: pytest.TempPathFactory, variable: str, platform_name: str) -> Path:
    """jax[cuda12-local] 0.10.2 and its closure for CPython 3.11 on `platform_name` (its manylinux
    tags from envbuild.matrix.platforms), and uv's wheel for that platform: the directory in
    `variable` when .ci/run prepared it, else `pip download`ed here. [cuda12-local] loads the image's
    CUDA, so no nvidia-* wheels: JAX runs on the CPU with it."""
    import sys
    from importlib import metadata

    from envbuild.matrix.platforms import platform

    machine = platform(platform_name).machine
    prepared = os.environ.get(variable)
    if prepared and all(
        any(Path(prepared).glob(pattern))
        for pattern in ("jax-0.10.2-*.whl", f"jaxlib-0.10.2-*_{machine}.whl", f"uv-*_{machine}.whl")
    ):
        return Path(prepared)
    tags = [flag for tag in platform(platform_name).wheel_tags for flag in ("--platform", tag)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--python-version", "3.11"]
    command += ["--only-binary=:all:", *tags]

    def fill(directory: Path) -> None:
        subprocess.run([*command, "jax[cuda12-local]==0.10.2", "-d", str(directory)], check=True)
        uv = f"uv=={metadata.version('uv')}"  # the uv the images install with, for this platform
        subprocess.run([*command, "--no-deps", uv, "-d", str(directory)], check=True)

    try:
        return shared_directory(factory, f"jax-{machine}-wheelhouse", fill)
    except subprocess.CalledProcessError as exc:
        pypi_unreachable(f"pip download of the {machine} JAX wheelhouse exited {exc.returncode}")


@pytest.fixture(scope="session")
def arm64_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The aarch64 JAX wheelhouse: the arm64 lock and the emulated arm64 image."""
    return jax_wheelhouse(tmp_path_factory, "ENVBUILD_TEST_WHEELHOUSE_ARM64", "linux/arm64")


@pytest.fixture(scope="session")
def jax_amd64_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The x86_64 JAX wheelhouse: the amd64 half of the two-platform JAX image."""
    return jax_wheelhouse(tmp_path_factory, "ENVBUILD_TEST_WHEELHOUSE_JAX_AMD64", "linux/amd64")


@pytest.fixture(scope="session")
def framework_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.13.0 (the CPU wheel) and its closure, for Python 3.11 on manylinux_2_28: one download
    for the whole run, whichever worker needs it first."""
    try:
        return shared_directory(
            tmp_path_factory, "framework-wheels", lambda into: download_for_target(into, "torch==2.13.0")
        )
    except subprocess.CalledProcessError as exc:
        pypi_unreachable(f"pip download torch==2.13.0 exited {exc.returncode}")


@pytest.fixture(scope="session")
def cuda_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.6.0 cu124 from PyPI with its nvidia-* wheels (tests/helpers/cudastack.py): the directory
    .ci/run keeps per machine, else one download for the whole run."""
    cudastack.wait_for_ci_download()
    prepared = os.environ.get(cudastack.VARIABLE)
    if prepared and cudastack.complete(Path(prepared)):
        return Path(prepared)
    try:
        return shared_directory(tmp_path_factory, "cuda-wheelhouse", cudastack.download)
    except subprocess.CalledProcessError as exc:
        pypi_unreachable(f"pip download of the pinned CUDA stack exited {exc.returncode}")


@pytest.fixture(scope="session")
def user_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spec's own index for the lock tests: app (with an extra and markers), lib 1.0 and 2.0."""
    directory = tmp_path_factory.mktemp("user-wheels")
    build_wheel(
        directory,
        "app",
        "1.0",
        ["lib>=1", 'linuxonly; sys_platform == "linux"', 'winonly; sys_platform == "win32"'],
        extras={"fast": ["speedup"]},
    )
    build_wheel(directory, "lib", "1.0")
    build_wheel(directory, "lib", "2.0", ["base"])
    for name in ("base", "linuxonly", "winonly", "speedup"):
        build_wheel(directory, name, "1.0")
    return directory


@pytest.fixture(scope="session")
def indexes(user_wheels: Path, framework_wheels: Path) -> Iterator[tuple[PackageIndex, PackageIndex]]:
    """(the user index, the framework index) on loopback, for `envbuild lock`."""
    with PackageIndex(user_wheels) as user, PackageIndex(framework_wheels) as framework:
        yield user, framework


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount a small tmpfs (read-only, or nearly full): real filesystems refusing a write, which
    root's permission bits cannot give. CI runs as root, where mount works."""
    mounts: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounts)}"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True
        )
        if done.returncode != 0:
            why = f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); CI runs as root"
            missing(why)
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["umount", str(point)], check=False)


@pytest.fixture(scope="session")
def anonymous_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ENVBUILD_TEST_REGISTRY (CI), else one already answering on 127.0.0.1:5000, else our own."""
    host = os.environ.get("ENVBUILD_TEST_REGISTRY")
    if host:
        yield host
        return
    if answers("127.0.0.1:5000"):
        yield "127.0.0.1:5000"
        return
    host, process = start_registry(tmp_path_factory.mktemp("registry-anon"))
    yield host
    stop(process)


@pytest.fixture
def images() -> Iterator[list[str]]:
    """Tags a test makes: removed afterwards, whatever happened."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        docker("rmi", "-f", tag, check=False)


# --- the docker and pypi markers --------------------------------------------------------------------

# The session fixtures above that `pip download` from PyPI (or pip's configured index): every test that
# uses one gets the `pypi` marker, so `-m "not pypi"` runs what needs no PyPI. A test module that
# reaches PyPI itself sets `pytestmark = pytest.mark.pypi`.
PYPI_FIXTURES = frozenset(
    {"arm64_wheelhouse", "framework_wheels", "indexes", "jax_amd64_wheelhouse", "wheelhouse"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a PyPI fixture are marked pypi. The engine modules that need the arm64 base run
    last (parallel.py). Docker tests skip without an engine, unless ENVBUILD_REQUIRE_DOCKER=1 (CI)
    makes that fail."""
    for item in items:
        if PYPI_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.pypi)
    parallel.run_arm64_modules_last(items)
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


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site as `make docs` builds it (mkdocs build --strict), once per test run."""
    from tests.helpers.docs import site

    return site(tmp_path_factory)
