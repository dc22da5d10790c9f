"""What auditing a wheel's kernels by range requests costs against downloading it whole.

`envbuild matrix refresh --audit` reads only the members of a wheel that hold the framework's
kernels (envbuild.audit.libraries), each with one range request sized from the zip central
directory, and lists them with cuobjdump. Both ways are measured in this run on the real
jax-cuda12-plugin 0.10.2 wheel served on loopback (fetched from PyPI once, first): the range read of
its kernel libraries, the range read of the one library the issue quotes (_linalg.so), and the whole
download followed by unpacking the same libraries. The wheel is almost all kernel libraries, so the
first ratio is near 1; a TensorFlow or torch wheel, whose kernels sit in one member among
thousands, is where range requests pay (the real-run figures are in the README).

Run: `.venv/bin/python bench/audit.py`
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.upstream import Answer, Upstream  # noqa: E402
from envbuild.audit.kernels import Kernels, cuobjdump_binary, read_kernels  # noqa: E402
from envbuild.refresh.arch_audit import kernel_member  # noqa: E402
from envbuild.refresh.members import read_members  # noqa: E402
from envbuild.refresh.upstream import Http, pypi_releases  # noqa: E402

PROJECT, VERSION = "jax-cuda12-plugin", "0.10.2"
REPEAT = 5


def _list(directory: str, paths: list[str], binary: str) -> list[Kernels]:
    return [read_kernels(os.path.join(directory, p), binary) for p in paths]


def _ranged(url: str, wanted, binary: str) -> tuple[float, int, list[Kernels]]:
    http = Http(timeout=60)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        read = read_members(http, url, wanted, scratch)
        kernels = _list(scratch, list(read.paths), binary)
    return time.perf_counter() - start, read.bytes_read, kernels


def _whole(url: str, binary: str) -> tuple[float, int, list[Kernels]]:
    http = Http(timeout=60)
    start = time.perf_counter()
    body = http.get(url).content
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(io.BytesIO(body)) as archive:
        paths = [n for n in archive.namelist() if kernel_member("jax", n)]
        for name in paths:
            archive.extract(name, scratch)
        kernels = _list(scratch, paths, binary)
    return time.perf_counter() - start, len(body), kernels


def main() -> int:
    files = pypi_releases(Http(timeout=60), "https://pypi.org", PROJECT)[VERSION]
    wheel = next(f for f in files if "-cp311-cp311-manylinux" in f.filename)
    body = Http(timeout=120).get(wheel.url).content
    binary = cuobjdump_binary()
    with Upstream() as server:
        server.add(f"/{wheel.filename}", Answer(body, content_type="application/zip", ranges=True))
        url = f"{server.root}/{wheel.filename}"
        ranged = [_ranged(url, lambda n: kernel_member("jax", n), binary) for _ in range(REPEAT)]
        one = [_ranged(url, lambda n: n.endswith("/_linalg.so"), binary) for _ in range(REPEAT)]
        whole = [_whole(url, binary) for _ in range(REPEAT)]
    assert ranged[0][2] == whole[0][2], "range read and whole download must list the same kernels"
    rows = [
        ("kernel libraries by range", ranged),
        ("_linalg.so alone by range", one),
        ("whole download", whole),
    ]
    print(f"{wheel.filename} ({len(body) / 2**20:.1f} MiB) on loopback, with cuobjdump, median of {REPEAT}:")
    for label, runs in rows:
        seconds = statistics.median(t for t, _, _ in runs)
        print(f"  {label:26}: {seconds * 1000:8.1f} ms, {runs[0][1] / 1024:8.0f} KiB read")
    full_s, full_b = statistics.median(t for t, _, _ in whole), whole[0][1]
    for label, runs in rows[:2]:
        seconds = statistics.median(t for t, _, _ in runs)
        print(f"  ratio, {label:19}: {full_s / seconds:.2f}x faster, {full_b / runs[0][1]:.2f}x fewer bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
