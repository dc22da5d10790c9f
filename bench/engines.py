"""Podman's build of the torch CPU image against Docker's, measured in one run (issue 37).

One context is rendered, air-gapped from the wheelhouse on the local Debian base: the tests' torch
2.13.0 CPU spec. Each engine then builds it without its layer cache, alternating, ROUNDS times:
`/usr/bin/docker build` with BuildKit, and `podman build --layers` (what `envbuild build --engine
docker|podman` run). Both pull nothing: the base is local to each (podman's copied with `podman pull
docker-daemon:`), and both read the same apt mirror inside the build. What is printed is each
engine's median and podman's ratio to Docker's: the baseline is this run's own Docker build.

Run: `.venv/bin/python bench/engines.py` (needs dockerd, podman and the tests' base image). There is
no target to miss: the ratio is what the issue's note reports. Exits 1 when either build fails.
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

ROUNDS = 2
BASE = "envbuild-test/bookworm:latest"
SPEC = """[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"
strategy = "wheels"

[packages]
pip = ["six==1.16.0"]
"""


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed: {(done.stdout + done.stderr)[-1500:]}")
    return seconds


def main() -> int:
    from envbuild._testing.pyindex import download_for_target, download_uv_for_target
    from envbuild.cli.app import main as envbuild

    if shutil.which("podman") is None:
        raise SystemExit("needs podman (apt-get install podman)")
    if subprocess.run(["/usr/bin/docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        raise SystemExit(f"needs the {BASE} image (made by the tests: make test)")
    if subprocess.run(["podman", "image", "exists", BASE], capture_output=True).returncode != 0:
        subprocess.run(["podman", "pull", "-q", f"docker-daemon:{BASE}"], check=True, capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-engines-"))
    try:
        prepared = Path(os.environ.get("ENVBUILD_TEST_WHEELHOUSE", "/tmp/envbuild-ci-wheelhouse"))
        if prepared.is_dir() and any(prepared.glob("torch-2.13.0*.whl")):
            wheels = prepared
        else:
            wheels = work / "wheels"
            download_for_target(wheels, "torch==2.13.0", "six==1.16.0", stderr=subprocess.DEVNULL)
            download_uv_for_target(wheels)
        (work / "envbuild.toml").write_text(SPEC)
        out = work / "out"
        spec = str(work / "envbuild.toml")
        rendered = envbuild(
            ["render", "-f", spec, "-o", str(out), "--wheelhouse", str(wheels), "--base-image", BASE]
        )
        assert rendered == 0
        context = str(out / "default")
        docker_env = {**os.environ, "DOCKER_BUILDKIT": "1"}
        times: dict[str, list[float]] = {"docker": [], "podman": []}
        for _ in range(ROUNDS):
            times["docker"].append(
                timed(
                    ["/usr/bin/docker", "build", "-q", "--no-cache", "-t", "envbuild-bench/engines", context],
                    docker_env,
                )
            )
            times["podman"].append(
                timed(
                    [
                        "podman",
                        "build",
                        "-q",
                        "--layers",
                        "--no-cache",
                        "-t",
                        "envbuild-bench/engines",
                        context,
                    ]
                )
            )
    finally:
        subprocess.run(["/usr/bin/docker", "rmi", "-f", "envbuild-bench/engines"], capture_output=True)
        subprocess.run(["podman", "rmi", "-f", "envbuild-bench/engines"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    docker_s, podman_s = statistics.median(times["docker"]), statistics.median(times["podman"])
    print(f"torch 2.13.0 CPU image, no layer cache, {ROUNDS} builds each, alternating (median):")
    for name, label, median in (("docker", "(BuildKit)", docker_s), ("podman", "(buildah) ", podman_s)):
        runs = ", ".join(f"{seconds:.1f}" for seconds in times[name])
        print(f"  {name} build {label}   {median:7.1f} s   runs {runs}")
    print(f"  podman / docker           {podman_s / docker_s:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
