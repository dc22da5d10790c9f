"""What the preflight guard adds to every Python start in a built image, against the same start
without it, measured in one run inside one container.

The image is the tests' torch 2.13.0 CPU image (rendered air-gapped from a wheelhouse, built on the
local Debian base), or the one named as the first argument. One container runs a harness that starts
`/opt/venv/bin/python -c pass` many times, interleaving four cases so that drift hits them alike:
* without: the guard's .pth renamed away (Python as it starts in an image without the guard);
* guard, all is well: a fake root with a real R580 driver file and an H100 (tests/fixtures/preflight/
  h100-r580) bind-mounted read-only: the driver read, the facts parsed, the GPU placed and judged;
* guard, no driver: the driverless path (one stat, one failed open, one line on stderr);
* guard, off: ENVBUILD_PREFLIGHT=off.
Each child gets a clean environment, so none inherits a verdict.

Run: `.venv/bin/python bench/preflight.py [IMAGE]` (needs dockerd and /usr/bin/docker). Target: the
guard adds <= 15 ms to a start when all is well (issue 36). Exits 1 when it is missed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.dockercli import docker  # noqa: E402

TARGET_ADDED_MS = 15.0
RUNS = 60
ROOT = REPO / "tests" / "fixtures" / "preflight" / "h100-r580"
BASE = "envbuild-test/bookworm:latest"
TAG = "envbuild-bench/preflight:latest"
SPEC = """[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"
strategy = "wheels"

[smoke]
device = "cpu"
"""
HARNESS = r"""
import json, os, statistics, subprocess, sys, time
pth, runs = sys.argv[1], int(sys.argv[2])
clean = {"PATH": "/opt/venv/bin:/usr/bin:/bin", "HOME": "/tmp"}
cases = {
    "without": dict(clean, ENVBUILD_PREFLIGHT_ROOT="/mnt"),
    "guard, all is well": dict(clean, ENVBUILD_PREFLIGHT_ROOT="/mnt"),
    "guard, no driver": dict(clean, ENVBUILD_PREFLIGHT_ROOT="/nonexistent"),
    "guard, off": dict(clean, ENVBUILD_PREFLIGHT_ROOT="/mnt", ENVBUILD_PREFLIGHT="off"),
}
samples = {name: [] for name in cases}
def once(env):
    start = time.perf_counter()
    done = subprocess.run(["/opt/venv/bin/python", "-c", "pass"], env=env, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    return took, done.stderr
for _ in range(3):
    once(clean)  # warm the page cache
for _ in range(runs):
    for name, env in cases.items():
        if name == "without":
            os.rename(pth, pth + ".away")
        try:
            took, err = once(env)
        finally:
            if name == "without":
                os.rename(pth + ".away", pth)
        assert (err == b"") == (name != "guard, no driver"), (name, err)
        samples[name].append(took * 1000)
print(json.dumps({name: statistics.median(values) for name, values in samples.items()}))
"""


def build_image() -> str:
    from envbuild._testing.pyindex import download_for_target, download_uv_for_target
    from envbuild.cli.app import main as envbuild

    if subprocess.run(["/usr/bin/docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        raise SystemExit(f"needs the {BASE} image (made by the tests: make test)")
    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-preflight-"))
    prepared = Path("/tmp/envbuild-ci-wheelhouse")
    if prepared.is_dir() and any(prepared.glob("torch-2.13.0*.whl")):
        wheels = prepared
    else:
        wheels = work / "wheels"
        download_for_target(wheels, "torch==2.13.0", stderr=subprocess.DEVNULL)
        download_uv_for_target(wheels)
    (work / "envbuild.toml").write_text(SPEC)
    spec, out = str(work / "envbuild.toml"), str(work / "out")
    code = envbuild(["render", "-f", spec, "-o", out, "--wheelhouse", str(wheels), "--base-image", BASE])
    assert code == 0
    docker("build", "-q", "-t", TAG, str(work / "out" / "default"))
    return TAG


def main(argv: list[str]) -> int:
    image = argv[0] if argv else build_image()
    site = docker(
        "run",
        "--rm",
        "-e",
        "ENVBUILD_PREFLIGHT=off",
        "--entrypoint",
        "python",
        image,
        "-c",
        "import envbuild_preflight, os; print(os.path.dirname(envbuild_preflight.__file__))",
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "harness.py").write_text(HARNESS)
        done = docker(
            "run",
            "--rm",
            "--user",
            "0",
            "--network",
            "none",
            "-e",
            "ENVBUILD_PREFLIGHT=off",
            "-v",
            f"{ROOT}:/mnt:ro",
            "-v",
            f"{scratch}:/bench:ro",
            "--entrypoint",
            "python",
            image,
            "/bench/harness.py",
            f"{site}/00-envbuild-preflight.pth",
            str(RUNS),
        )
    medians = json.loads(done.stdout.strip().splitlines()[-1])
    without = medians["without"]
    print(f"Python start-up in {image} (median of {RUNS}, interleaved, one container):")
    for name, value in medians.items():
        print(f"  {name:<20} {value:7.2f} ms   {value / without:5.2f}x without   {value - without:+6.2f} ms")
    added = medians["guard, all is well"] - without
    verdict = "ok" if added <= TARGET_ADDED_MS else "MISSED"
    print(f"  the guard adds {added:.2f} ms when all is well (target <= {TARGET_ADDED_MS:.0f} ms): {verdict}")
    return 0 if added <= TARGET_ADDED_MS else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
