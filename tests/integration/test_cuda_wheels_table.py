"""The table in matrix/README.md of what cuobjdump reads of the nvidia-* wheels, replayed for real
(issue 32): the torch 2.6.0 cu124 wheels PyPI serves (ENVBUILD_TEST_CUDA_WHEELHOUSE: the directory
.ci/run downloads tests/helpers/cudastack.py's pinned list to, hash-checked) are served on 127.0.0.1
with Range support, each nvidia-* wheel is read through the code bench/cuda_wheels.py runs against
PyPI (range requests for its shared objects only, NVIDIA's cuobjdump on each), and the answer must
be the committed row: the same wheel (its sha256 is the pinned one), the same cuobjdump, and per
library the same reading and the same reason.

What it costs, and why not all of it runs by default: inflating the 2.9 GB of shared objects the 13
wheels hold is most of a full replay (about 34 CPU seconds on the 2-core machines here, over 60 s of
wall time when they are busy; cuDNN's 634 MB wheel alone is a third). tests/engine/test_cuda_image.py
already has cuobjdump read every one of these libraries, in the image it builds from the same files,
and checks each reading against the table. So by default this test reads in full, through the range
requests and cuobjdump, only the wheels that carry what the engine test cannot: every wheel with a
library read partly or not at all (cuBLAS: the reasons), and every wheel under FULL_BELOW bytes (a
library read whole, cuRAND, and the ones without device code); of the six large wheels it reads the
central directory by range request and checks the row names exactly their shared objects.
ENVBUILD_TEST_CUDA_WHEELS_ALL=1 reads all 13 in full (what bench/cuda_wheels.py does from PyPI).
One test per wheel, so pytest-xdist spreads them over the cores; each library is inflated to
memory-backed /dev/shm where there is one, not to the disk.

Without the variable the tests skip (the session's cuda_wheelhouse fixture would download 2.9 GB);
under ENVBUILD_REQUIRE_DOCKER=1 (CI) they fail instead, since a skipped replay would hide a table
that no longer says what cuobjdump does.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.audit.kernels import cuobjdump_binary
from envbuild.audit.tree import is_shared_object_name
from envbuild.refresh import cuda_wheels
from envbuild.refresh.upstream import RANGE_BLOCK, Http
from tests.helpers import cudastack
from tests.helpers.paths import REPO

WHEELHOUSE = cudastack.VARIABLE
REQUIRED = "ENVBUILD_REQUIRE_DOCKER"
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
FULL_BELOW = 64 * 1024 * 1024  # wheels smaller than this are read in full (all but the six largest)
EVERY = os.environ.get("ENVBUILD_TEST_CUDA_WHEELS_ALL") == "1"
# (canonical name, version, sha256) of every pinned nvidia-* wheel: one test each, known at collection
NVIDIA = [
    (name, version, sha) for name, (version, sha) in cudastack.pinned().items() if name.startswith("nvidia-")
]


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    directory = os.environ.get(WHEELHOUSE)
    if not directory:
        why = f"{WHEELHOUSE} is not set (the directory of torch 2.6.0 cu124's wheels from PyPI)"
        if os.environ.get(REQUIRED) == "1":
            pytest.fail(f"the nvidia-* wheel table is checked here and {why}")
        pytest.skip(f"{why}; set {REQUIRED}=1 to fail instead")
    path = Path(directory)
    if not cudastack.complete(path):
        pytest.fail(f"{WHEELHOUSE}={directory} lacks wheels of {cudastack.PINNED.name}")
    return path


@pytest.fixture(scope="module")
def index(wheelhouse: Path):
    with PackageIndex(wheelhouse, ranges=True) as served:
        yield served


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], cuda_wheels.WheelRead]:
    return cuda_wheels.table_rows((REPO / "matrix" / "README.md").read_text(encoding="utf-8"))


def test_the_table_has_a_row_for_each_pinned_wheel_with_its_sha256(rows) -> None:
    """Without the wheels: every nvidia-* wheel of the pinned torch 2.6.0 cu124 stack has its row, read
    from the very file the pin names (cuBLAS partly: the issue's libcublas.so.12)."""
    assert len(NVIDIA) == 13
    for package, version, sha256 in NVIDIA:
        assert rows[(package, version)].sha256 == sha256, package
    cublas = rows[("nvidia-cublas-cu12", "12.4.5.8")]
    assert {lib.name: lib.read for lib in cublas.libraries}["libcublas.so.12"] == cuda_wheels.PARTLY


@pytest.mark.parametrize(("package", "version", "sha256"), NVIDIA, ids=[name for name, _, _ in NVIDIA])
def test_the_committed_row_is_what_cuobjdump_reads_of_the_real_wheel(
    package: str, version: str, sha256: str, wheelhouse: Path, index, rows
) -> None:
    (wheel,) = (
        p for p in wheelhouse.glob("nvidia_*.whl") if cuda_wheels.wheel_key(p.name) == (package, version)
    )
    row = rows.get((package, version))
    assert row is not None, (
        f"matrix/README.md has no row for {package} {version}: run bench/cuda_wheels.py --write"
    )
    assert (row.filename, row.sha256) == (wheel.name, sha256)  # the very file the table was read from
    binary = cuobjdump_binary()
    assert row.cuobjdump == cuda_wheels.version_number(binary), "cuobjdump changed: run bench/cuda_wheels.py"
    http, url = Http(timeout=120), index.file_url(wheel.name)
    before = index.settle()  # the bytes of the last case's answers all counted
    stopped = row.names(cuda_wheels.PARTLY) or row.names(cuda_wheels.NOT_READ)
    if not (EVERY or stopped or wheel.stat().st_size < FULL_BELOW):  # read by the engine test's audit
        assert cuda_wheels.wheel_libraries(http, url) == tuple(lib.name for lib in row.libraries)
        assert index.settle() - before <= RANGE_BLOCK + 64 * 1024  # the central directory only
        return
    libraries = cuda_wheels.read_wheel(http, url, binary, scratch=SCRATCH)
    assert libraries == row.libraries
    # by range requests: every shared object's bytes came, and no more than the central directory's
    # block (the file's last RANGE_BLOCK) besides
    with zipfile.ZipFile(wheel) as archive:
        members = sum(m.compress_size for m in archive.infolist() if is_shared_object_name(m.filename))
    sent = index.settle() - before
    assert members <= sent <= members + RANGE_BLOCK + 64 * 1024, (members, sent)
