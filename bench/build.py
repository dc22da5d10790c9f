"""Layer ordering and uv pay off: cold builds with pip and with uv, the rebuild after changing one pip
package, and image size overhead.

Measured in one run, on the real Engine with BuildKit, from a local Debian base and a torch 2.13.0
CPU wheelhouse (air-gapped, as the tests build):
* envbuild: a cold build (no cache) with `[image] installer = "pip"` against one with the default uv,
  same wheelhouse and base; then a warm rebuild (uv) after changing one user package;
* a naive one-layer Dockerfile that installs the same packages in one RUN, rebuilt after the same
  change (the usual hand-written Dockerfile);
* the envbuild image's size against its content: the base, the OS packages and Python, and the venv.

Run: `.venv/bin/python bench/build.py` (needs dockerd, /usr/bin/docker and debootstrap or the
envbuild-test/bookworm image). Targets: uv cold >= 1.6x faster than pip cold; warm <= 5% of the uv
cold build; envbuild >= 20x faster than naive on the rebuild; size overhead <= 5%. Each run leaves
about 3.5 GB of BuildKit cache records (the --no-cache builds write fresh ones); `docker builder
prune` reclaims them.
"""

from __future__ import annotations

import json
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
pip = ["{six}", "envbuild-bench-nonce"]

[image]
installer = "{installer}"
"""
NAIVE = """FROM {base}
ARG DEBIAN_FRONTEND=noninteractive
COPY wheels /wheels
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/venv \\
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels torch==2.13.0 {six} \\
    envbuild-bench-nonce \\
 && rm -rf /wheels
"""


def timed_build(context: Path, tag: str, *extra: str) -> float:
    start = time.perf_counter()
    docker("build", "-q", "-t", tag, *extra, str(context))
    return time.perf_counter() - start


def main() -> int:
    from envbuild.cli.app import main as envbuild

    if subprocess.run(["/usr/bin/docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        print(f"needs the {BASE} image (made by the tests: make test)")
        return 1
    from envbuild._testing.pyindex import build_wheel, download_for_target, download_uv_for_target

    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-build-"))
    wheels = work / "wheels"
    download_for_target(wheels, "torch==2.13.0", "six==1.16.0", stderr=subprocess.DEVNULL)
    download_for_target(wheels, "six==1.17.0", no_deps=True, stderr=subprocess.DEVNULL)
    download_uv_for_target(wheels)
    # A package whose version is new every run: BuildKit keeps cache records between runs, and a
    # rebuild that finds the changed layer cached from an earlier run would measure nothing.
    build_wheel(wheels, "envbuild-bench-nonce", f"1.0.{time.time_ns()}")
    tags = []
    try:

        def render(six: str, installer: str = "uv") -> Path:
            (work / "envbuild.toml").write_text(SPEC.format(six=six, installer=installer))
            envbuild(
                [
                    "render",
                    "-f",
                    str(work / "envbuild.toml"),
                    "-o",
                    str(work / "out"),
                    "--wheelhouse",
                    str(wheels),
                    "--base-image",
                    BASE,
                ]
            )
            return work / "out" / "default"

        tags += [
            "envbuild-bench:cold",
            "envbuild-bench:warm",
            "envbuild-bench:naive1",
            "envbuild-bench:naive2",
            "envbuild-bench:cold-pip",
        ]
        cold_pip = timed_build(render("six==1.16.0", "pip"), tags[4], "--no-cache")
        cold = timed_build(render("six==1.16.0"), tags[0], "--no-cache")
        warm = timed_build(render("six==1.17.0"), tags[1])

        naive = work / "naive"
        naive.mkdir()
        shutil.copytree(wheels, naive / "wheels")
        (naive / "Dockerfile").write_text(NAIVE.format(base=BASE, six="six==1.16.0"))
        timed_build(naive, tags[2], "--no-cache")
        (naive / "Dockerfile").write_text(NAIVE.format(base=BASE, six="six==1.17.0"))
        naive_rebuild = timed_build(naive, tags[3])

        size = int(docker("image", "inspect", tags[1], "--format", "{{.Size}}").stdout)
        base_size = int(docker("image", "inspect", BASE, "--format", "{{.Size}}").stdout)
        history = json.loads(
            "["
            + ",".join(
                docker("history", "--no-trunc", "--format", "{{json .}}", tags[1]).stdout.split("\n")[:-1]
            )
            + "]"
        )
        python_layer = 0
        for layer in history:
            if "apt-get install" in layer["CreatedBy"]:
                python_layer = _bytes(layer["Size"])
        venv = int(
            docker("run", "--rm", "--network", "none", tags[1], "du", "-sb", "/opt/venv").stdout.split()[0]
        )
        content = base_size + python_layer + venv
        overhead = (size - content) / size
    finally:
        for tag in tags:
            subprocess.run(["/usr/bin/docker", "rmi", "-f", tag], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)  # the wheelhouse and contexts are ~400 MB a run
    print("envbuild build, torch 2.13.0 CPU + one user package, local Debian base, BuildKit")
    print(f"  cold build (no cache), pip         {cold_pip:7.1f} s")
    print(
        f"  cold build (no cache), uv          {cold:7.1f} s   "
        f"{cold_pip / cold:5.2f}x faster than pip (target >= 1.6x)"
    )
    print(f"  warm rebuild, one package changed  {warm:7.1f} s   {warm / cold:6.1%} of cold (target <= 5%)")
    print(
        f"  naive one-layer rebuild            {naive_rebuild:7.1f} s   "
        f"envbuild {naive_rebuild / warm:5.1f}x faster (target >= 20x)"
    )
    print(
        f"  image {size / 1e6:7.1f} MB = base {base_size / 1e6:.1f} + python {python_layer / 1e6:.1f} + venv "
        f"{venv / 1e6:.1f} + overhead {(size - content) / 1e6:.1f} MB ({overhead:.1%}, target <= 5%)"
    )
    return 0


def _bytes(text: str) -> int:
    units = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * units[unit])
    return int(float(text))


if __name__ == "__main__":
    raise SystemExit(main())
