"""How long `envbuild lock` takes to lock the torch closure against a package index on loopback.

Cold: an empty uv cache (every page and wheel metadata fetched); warm: the same lock again with the
cache uv filled. Both measured in this run; the ratio is the figure to watch. Then what the CI gate
costs against that warm lock: `lock --check` (seal, drift and a full re-resolution) and
`lock --check --offline` (seal and drift only).

Run: `.venv/bin/python bench/lock.py` (downloads the torch CPU wheel's closure once with pip).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.pyindex import PackageIndex, build_wheel, download_for_target  # noqa: E402

SPEC = """[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"

[packages]
pip = ["app"]
index-url = "{user}"
framework-index-url = "{framework}"
"""


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-lock-"))
    framework_dir, user_dir = work / "framework", work / "user"
    user_dir.mkdir()
    download_for_target(framework_dir, "torch==2.13.0", stderr=subprocess.DEVNULL)
    build_wheel(user_dir, "app", "1.0", ["lib"])
    build_wheel(user_dir, "lib", "1.0")
    envbuild = str(Path(sys.executable).with_name("envbuild"))
    with PackageIndex(framework_dir) as framework, PackageIndex(user_dir) as user:
        (work / "envbuild.toml").write_text(SPEC.format(user=user.url, framework=framework.url))

        base = ["--base-image", "debian:bookworm-slim@sha256:" + "a" * 64]

        def run(cache: str, *check: str) -> float:
            lock = work / "envbuild.lock"
            if lock.exists() and not check:
                lock.unlink()
            env = {**os.environ, "UV_CACHE_DIR": cache, "ENVBUILD_CACHE_DIR": str(work / "matrix-cache")}
            start = time.perf_counter()
            subprocess.run(
                [envbuild, "lock", "-f", str(work / "envbuild.toml"), *base, *check],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            return time.perf_counter() - start

        cold = statistics.median(run(tempfile.mkdtemp(dir=work)) for _ in range(3))
        warm_cache = tempfile.mkdtemp(dir=work)
        run(warm_cache)
        warm = statistics.median(run(warm_cache) for _ in range(5))
        check = statistics.median(run(warm_cache, "--check") for _ in range(5))
        offline = statistics.median(run(warm_cache, "--check", "--offline") for _ in range(5))
    shutil.rmtree(work, ignore_errors=True)  # wheels and uv caches: ~200 MB a run
    print("envbuild lock, torch 2.13.0 closure + 2 user packages, loopback indexes")
    print(f"  cold uv cache   {cold * 1000:8.0f} ms")
    print(f"  warm uv cache   {warm * 1000:8.0f} ms")
    print(f"  warm/cold       {warm / cold:8.2f}")
    print(f"  check (re-resolve, warm)  {check * 1000:8.0f} ms   check/warm lock {check / warm:6.2f}")
    print(f"  check --offline           {offline * 1000:8.0f} ms   offline/warm lock {offline / warm:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
