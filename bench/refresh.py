"""What reading a wheel's METADATA with range requests saves over downloading the wheel.

`envbuild matrix refresh` reads the CUDA pins of every new framework release from its wheel's
METADATA. A torch wheel is about 900 MB; the refresh reads its central directory and one member.
Both ways are measured in this run against the same server on loopback (the recorded torch 2.15.0
METADATA inside a wheel padded to WHEEL_MB), and the ratios are the figures to watch. Then a whole
refresh of the bundled matrix against the recorded upstream of envbuild/_testing/recorded.py is timed.

Run: `.venv/bin/python bench/refresh.py`
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.recorded import FIXTURES  # noqa: E402
from envbuild._testing.upstream import Answer, Upstream  # noqa: E402
from envbuild.refresh.upstream import Http, wheel_metadata  # noqa: E402

WHEEL_MB = 256
NAME = "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"
REPEAT = 5


def _wheel() -> bytes:
    import io
    import zipfile

    metadata = (FIXTURES / "metadata" / f"{NAME}.METADATA").read_text()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as wheel:
        wheel.writestr("torch/lib/libtorch_cuda.so", os.urandom(WHEEL_MB * 1024 * 1024))
        wheel.writestr("torch-2.15.0.dist-info/METADATA", metadata)
    return buffer.getvalue()


def _time(url: str) -> tuple[float, int]:
    http = Http(timeout=60)
    start = time.perf_counter()
    result = wheel_metadata(http, url)
    assert "nvidia-cudnn-cu13==9.26.0.51" in result.text
    return time.perf_counter() - start, result.bytes_read


def main() -> int:
    body = _wheel()
    with Upstream() as ranged, Upstream() as plain:
        ranged.add(f"/files/{NAME}", Answer(body, content_type="application/octet-stream", ranges=True))
        plain.add(f"/files/{NAME}", Answer(body, content_type="application/octet-stream", ranges=False))
        range_runs = [_time(f"{ranged.root}/files/{NAME}") for _ in range(REPEAT)]
        full_runs = [_time(f"{plain.root}/files/{NAME}") for _ in range(REPEAT)]
    range_s = statistics.median(t for t, _ in range_runs)
    full_s = statistics.median(t for t, _ in full_runs)
    range_bytes, full_bytes = range_runs[0][1], full_runs[0][1]
    print(f"wheel of {len(body) / 2**20:.0f} MiB on loopback, median of {REPEAT}:")
    print(f"  range requests : {range_s * 1000:8.1f} ms, {range_bytes / 1024:8.0f} KiB read")
    print(f"  full download  : {full_s * 1000:8.1f} ms, {full_bytes / 1024:8.0f} KiB read")
    print(f"  ratio          : {full_s / range_s:.0f}x faster, {full_bytes / range_bytes:.0f}x fewer bytes")

    # a whole refresh: the test suite's scenario (the matrix before a few real releases, the
    # recorded PyPI answers, PEP 691 indexes, a paginated tag list behind a Bearer challenge)
    from envbuild._testing.recorded import make_stale_matrix, serve_everything
    from envbuild.refresh.run import refresh, settings_from

    scratch = tempfile.TemporaryDirectory(prefix="envbuild-bench-refresh-")
    matrix = make_stale_matrix(Path(scratch.name))
    with scratch, Upstream(bearer_prefix="/v2/") as server:
        serve_everything(server, matrix)
        settings = settings_from(None, server.root, f"{server.root}/whl", f"{server.host}/nvidia/cuda")
        times, findings = [], []
        for _ in range(REPEAT):
            start = time.perf_counter()
            findings = refresh(str(matrix), settings, "2026-11-29")
            times.append(time.perf_counter() - start)
        sent = sum(size for *_, size in server.log) / REPEAT
    print(
        f"whole refresh against the recorded upstream: {statistics.median(times) * 1000:.0f} ms median, "
        f"{len(findings)} findings, {sent / 1024:.0f} KiB served per run"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
