"""How long `envbuild lock` takes to lock the torch closure against a package index on loopback.

Cold: an empty uv cache (every page and wheel metadata fetched); warm: the same lock again with the
cache uv filled. Both measured in this run; the ratio is the figure to watch. Then what the CI gate
costs against that warm lock: `lock --check` (seal, drift and a full re-resolution) and
`lock --check --offline` (seal and drift only). Last, relocking an existing lock two ways: a real
relock (the spec edited, so uv resolves again, warm cache) and a no-op relock (nothing changed:
decided from the lock alone, issue 18's target <= 0.5 s), and their ratio.

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

        def run(cache: str, *check: str, keep: bool = False, expect: str = "") -> float:
            """One `envbuild lock` in its own process; the lock is removed first unless `check` or
            `keep`; `expect` is text its stdout must hold (so a no-op is known to be one)."""
            lock = work / "envbuild.lock"
            if lock.exists() and not check and not keep:
                lock.unlink()
            env = {**os.environ, "UV_CACHE_DIR": cache, "ENVBUILD_CACHE_DIR": str(work / "matrix-cache")}
            start = time.perf_counter()
            done = subprocess.run(
                [envbuild, "lock", "-q", "-f", str(work / "envbuild.toml"), *base, *check],
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            took = time.perf_counter() - start
            if expect not in done.stdout:
                raise SystemExit(f"expected {expect!r} from envbuild lock, got:\n{done.stdout}")
            return took

        def real_relock(edit: int) -> float:
            """A relock after an edit of the spec (a comment: the spec digest changes, so uv runs)."""
            spec = SPEC.format(user=user.url, framework=framework.url) + f"# edit {edit}\n"
            (work / "envbuild.toml").write_text(spec)
            return run(warm_cache, keep=True, expect="wrote ")

        cold = statistics.median(run(tempfile.mkdtemp(dir=work)) for _ in range(3))
        warm_cache = tempfile.mkdtemp(dir=work)
        run(warm_cache)
        warm = statistics.median(run(warm_cache) for _ in range(5))
        check = statistics.median(run(warm_cache, "--check") for _ in range(5))
        offline = statistics.median(run(warm_cache, "--check", "--offline") for _ in range(5))
        real = statistics.median(real_relock(n) for n in range(5))
        noop = statistics.median(run(warm_cache, keep=True, expect="is up to date") for _ in range(5))
    shutil.rmtree(work, ignore_errors=True)  # wheels and uv caches: ~200 MB a run
    print("envbuild lock, torch 2.13.0 closure + 2 user packages, loopback indexes")
    print(f"  cold uv cache   {cold * 1000:8.0f} ms")
    print(f"  warm uv cache   {warm * 1000:8.0f} ms")
    print(f"  warm/cold       {warm / cold:8.2f}")
    print(f"  check (re-resolve, warm)  {check * 1000:8.0f} ms   check/warm lock {check / warm:6.2f}")
    print(f"  check --offline           {offline * 1000:8.0f} ms   offline/warm lock {offline / warm:6.2f}")
    print(f"  relock, spec edited (warm)      {real * 1000:8.0f} ms")
    print(f"  relock, nothing changed (no-op) {noop * 1000:8.0f} ms   target <= 500 ms")
    print(f"  no-op/real relock               {noop / real:8.2f}   ({real / noop:.0f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
