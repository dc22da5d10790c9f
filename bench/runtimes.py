"""What verifying through a cluster runtime costs, against verifying with Docker in the same run.

A Slurm verify job (`envbuild ci slurm --runtime charliecloud`) gets the candidate by digest, unpacks
it, runs the smoke step with ch-run and removes what it unpacked; `envbuild verify` with Docker runs
the same smoke program in a container of an image the Engine already holds. Measured here, on the
real Engine, registry and Charliecloud, with the torch 2.13.0 CPU image the tests build:

* baseline: `envbuild verify IMAGE --smoke-device cpu` (Docker, the image local), best of 3;
* `envbuild verify REPO@sha256:... --runtime charliecloud --smoke-device cpu`, once: the whole call,
  and its smoke step alone (the record's `seconds`), so the unpack is shown apart from the step.

Targets: the smoke step under ch-run within 1.5x of the whole Docker verify (the runtime adds nothing
to the step itself); the unpack is a one-off per candidate and per node, reported, not judged.

Run: `.venv/bin/python bench/runtimes.py` (dockerd, the envbuild-test/bookworm image, a registry on
$ENVBUILD_TEST_REGISTRY or 127.0.0.1:5000, and Charliecloud's ch-convert and ch-run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.dockercli import docker  # noqa: E402

BASE = "envbuild-test/bookworm:latest"
SPEC = """[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"

[packages]
pip = ["six==1.16.0"]
"""
TARGET_RATIO = 1.5
REPEAT = 3


def envbuild(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "envbuild", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    from envbuild._testing.pyindex import download_for_target, download_uv_for_target

    missing = [tool for tool in ("ch-convert", "ch-run") if shutil.which(tool) is None]
    if missing:
        print(f"needs Charliecloud ({', '.join(missing)} not on PATH)")
        return 1
    if subprocess.run(["/usr/bin/docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        print(f"needs the {BASE} image (made by the tests: make test)")
        return 1
    registry = os.environ.get("ENVBUILD_TEST_REGISTRY") or "127.0.0.1:5000"
    os.environ.setdefault("USER", "root")
    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-runtimes-"))
    local = "envbuild-bench:runtimes"
    remote = f"{registry}/envbuild-bench/runtimes:candidate"
    try:
        wheels = work / "wheels"
        download_for_target(wheels, "torch==2.13.0", "six==1.16.0", stderr=subprocess.DEVNULL)
        download_uv_for_target(wheels)
        (work / "envbuild.toml").write_text(SPEC)
        render = ["render", "-f", str(work / "envbuild.toml"), "-o", str(work / "out")]
        envbuild(*render, "--wheelhouse", str(wheels), "--base-image", BASE)
        docker("build", "-q", "-t", local, str(work / "out" / "default"))
        docker("tag", local, remote)
        pushed = docker("push", remote).stdout
        digest = next(word for word in pushed.split() if word.startswith("sha256:"))
        candidate = f"{remote.rsplit(':', 1)[0]}@{digest}"

        baseline = min(envbuild("verify", local, "--smoke-device", "cpu") for _ in range(REPEAT))
        record = work / "record.json"
        unpack_dir = work / "unpacked"
        unpack_dir.mkdir()
        os.environ["ENVBUILD_RUNTIME_DIR"] = str(unpack_dir)
        whole = envbuild(
            "verify", candidate, "--runtime", "charliecloud", "--smoke-device", "cpu", "--record", str(record)
        )
        step = float(json.loads(record.read_text())["seconds"])
        left = list(unpack_dir.iterdir())
    finally:
        for ref in (local, remote):
            subprocess.run(["/usr/bin/docker", "rmi", "-f", ref], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    ratio = step / baseline
    print("envbuild verify of the torch 2.13.0 CPU image, smoke step on the CPU")
    print(f"  baseline: Docker, image local (best of {REPEAT})        {baseline:7.2f} s")
    print(f"  Charliecloud by digest, whole call               {whole:7.2f} s   {whole / baseline:.1f}x")
    print(f"    of which the smoke step under ch-run           {step:7.2f} s   {ratio:.2f}x the baseline")
    print(f"    of which pull + unpack + cleanup               {whole - step:7.2f} s   once per candidate")
    print(f"  left unpacked afterwards: {len(left)} entries")
    met = ratio <= TARGET_RATIO and not left
    verdict = "met" if met else "MISSED"
    print(f"target: smoke step under ch-run within {TARGET_RATIO}x of the Docker verify: {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
