"""The table in matrix/README.md of what cuobjdump reads of the nvidia-* wheels, replayed for real
(issue 32): the torch 2.6.0 cu124 wheels PyPI serves (ENVBUILD_TEST_CUDA_WHEELHOUSE: the directory
.ci/run downloads them to, with hashes) are served on 127.0.0.1 with Range support, each nvidia-*
wheel is read through the code bench/cuda_wheels.py runs against PyPI (range requests for its shared
objects only, NVIDIA's cuobjdump on each), and the answer must be the committed row: the same wheel
file, the same cuobjdump, and per library the same reading and the same reason.

One test per wheel, so pytest-xdist spreads them over the cores: inflating the 2.9 GB of shared
objects is most of the cost (about 30 CPU seconds in all here; cuDNN's 634 MB wheel alone is a third).
Each library is inflated to memory-backed /dev/shm where there is one, not to the disk.

Without the variable the tests skip; under ENVBUILD_REQUIRE_DOCKER=1 (CI) they fail instead, since a
skipped replay would hide a table that no longer says what cuobjdump does.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.audit.kernels import cuobjdump_binary
from envbuild.audit.tree import is_shared_object_name
from envbuild.refresh import cuda_wheels
from envbuild.refresh.upstream import RANGE_BLOCK, Http
from tests.helpers.paths import REPO

WHEELHOUSE = "ENVBUILD_TEST_CUDA_WHEELHOUSE"
REQUIRED = "ENVBUILD_REQUIRE_DOCKER"
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
_WHEEL_RE = re.compile(r"^(?P<name>nvidia_[A-Za-z0-9_]+)-(?P<version>[^-]+)-.*\.whl$")


def _wheels() -> list[str]:
    """The nvidia-* wheel names of the wheelhouse, at collection: one test each."""
    directory = os.environ.get(WHEELHOUSE)
    if not directory or not os.path.isdir(directory):
        return ["(no wheelhouse)"]
    found = sorted(name for name in os.listdir(directory) if _WHEEL_RE.match(name))
    return found or ["(no nvidia-* wheel)"]


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    directory = os.environ.get(WHEELHOUSE)
    if not directory:
        why = f"{WHEELHOUSE} is not set (the directory of torch 2.6.0 cu124's wheels from PyPI)"
        if os.environ.get(REQUIRED) == "1":
            pytest.fail(f"the nvidia-* wheel table is checked here and {why}")
        pytest.skip(f"{why}; set {REQUIRED}=1 to fail instead")
    path = Path(directory)
    if not path.is_dir() or not any(_WHEEL_RE.match(p.name) for p in path.glob("nvidia_*.whl")):
        pytest.fail(f"{WHEELHOUSE}={directory} holds no nvidia_*.whl")
    return path


@pytest.fixture(scope="module")
def index(wheelhouse: Path):
    with PackageIndex(wheelhouse, ranges=True) as served:
        yield served


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], cuda_wheels.WheelRead]:
    return cuda_wheels.table_rows((REPO / "matrix" / "README.md").read_text(encoding="utf-8"))


def test_the_table_has_the_wheels_of_torch_2_6_0_cu124(rows) -> None:
    """The rows the replay compares with are there (and parse), whatever the wheelhouse holds."""
    for package in ("nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cusparselt-cu12"):
        assert any(key[0] == package for key in rows), package
    cublas = rows[("nvidia-cublas-cu12", "12.4.5.8")]
    assert {lib.name: lib.read for lib in cublas.libraries}["libcublas.so.12"] == cuda_wheels.PARTLY


@pytest.mark.parametrize("name", _wheels())
def test_the_committed_row_is_what_cuobjdump_reads_of_the_real_wheel(
    name: str, wheelhouse, index, rows
) -> None:
    match = _WHEEL_RE.match(name)
    assert match is not None, f"{name} in {wheelhouse}"
    wheel = wheelhouse / name
    key = (cuda_wheels.canonical(match.group("name")), match.group("version"))
    row = rows.get(key)
    assert row is not None, (
        f"matrix/README.md has no row for {key[0]} {key[1]}: run bench/cuda_wheels.py --write"
    )
    assert row.filename == name  # PyPI never serves other bytes under a file name once used
    binary = cuobjdump_binary()
    version = cuda_wheels.version_number(binary)
    assert row.cuobjdump == version, (
        f"the row was read with cuobjdump {row.cuobjdump}: re-run bench/cuda_wheels.py"
    )
    before = index.bytes_sent
    libraries = cuda_wheels.read_wheel(Http(timeout=120), index.file_url(name), binary, scratch=SCRATCH)
    assert libraries == row.libraries
    # by range requests: every shared object's bytes came, and no more than the central directory's
    # block (the file's last RANGE_BLOCK) besides
    with zipfile.ZipFile(wheel) as archive:
        members = sum(m.compress_size for m in archive.infolist() if is_shared_object_name(m.filename))
    sent = index.bytes_sent - before
    assert members <= sent <= members + RANGE_BLOCK + 64 * 1024, (members, sent)
