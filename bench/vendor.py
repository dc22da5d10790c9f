"""What `envbuild vendor` costs: a first run into an empty bundle against a second, no-op one.

A small locked project on loopback services: a Python index (envbuild._testing.pyindex) with a few
wheels, a conda channel (envbuild._testing.condachannel) with a few package files, and a read-only
registry started here that serves one base image (a 4 MiB layer) over the registry API, so the bench
needs neither Docker nor a registry of the host's. The lock is written through envbuild's lock
model (no resolution). Each run is `envbuild vendor` in its own process. The first fills an empty
directory; the second finds every file there with its hash (each one read and hashed again) and
fetches none. The baseline, measured in the same run, is the first run; the figures to watch are the
ratio no-op/first and the bytes each run fetched, as the services counted them.

Target: the no-op run fetches no file (pages of the Python index may still be read: that is how
vendor finds which wheel the lock pins). Run: `.venv/bin/python bench/vendor.py`
"""

from __future__ import annotations

import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.condachannel import CondaChannel  # noqa: E402
from envbuild._testing.lockedproject import (  # noqa: E402
    OCI_MANIFEST,
    CondaFile,
    one_layer_image,
    sha256_digest,
    write_locked_project,
)
from envbuild._testing.pyindex import PackageIndex, build_wheel  # noqa: E402

ENVBUILD = str(Path(sys.executable).with_name("envbuild"))
WHEELS = ("app", "click", "einops", "lib", "rich", "tqdm")  # a lock lists them by name
# python in the framework layer, then the user layer's by name
CONDA = (
    CondaFile(name="python", version="3.11.9", build="h0_0", subdir="linux-64"),
    *(
        CondaFile(name=name, version="1.0", build="pyhd8ed1ab_0", subdir="noarch")
        for name in ("attrs", "tool", "yaml")
    ),
    CondaFile(name="zlib", version="1.3.1", build="h0_0", subdir="linux-64"),
)
LAYER_BYTES = 4 << 20
RUNS = 3


class StaticRegistry:
    """A read-only registry on 127.0.0.1: /v2/, and the manifest and blobs of one image by digest.
    `served` counts the body bytes it sent, `requests` the requests."""

    def __init__(self, repository: str) -> None:
        self.repository = repository
        self.blobs: dict[str, bytes] = {}
        self.manifest = b""
        self.served = 0
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    def image(self) -> str:
        """One one-layer image (random bytes: gzip leaves them their size); its manifest digest."""
        image = one_layer_image("opt/payload.bin", random.Random(38).randbytes(LAYER_BYTES))
        self.blobs.update(image.blobs)
        self.manifest = image.manifest
        return image.digest

    def __enter__(self) -> StaticRegistry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _answer(self, body: bool) -> None:
                registry.requests += 1
                path = self.path.split("?", 1)[0]
                prefix = f"/v2/{registry.repository}/"
                data, kind = None, "application/json"
                if path == "/v2/":
                    data = b"{}"
                elif path == f"{prefix}manifests/{sha256_digest(registry.manifest)}":
                    data, kind = registry.manifest, OCI_MANIFEST
                elif path.startswith(f"{prefix}blobs/"):
                    data, kind = registry.blobs.get(path.rsplit("/", 1)[1]), "application/octet-stream"
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                if path != "/v2/":
                    self.send_header("Docker-Content-Digest", sha256_digest(data))
                self.end_headers()
                if body:
                    self.wfile.write(data)
                    registry.served += len(data)

            def do_GET(self) -> None:
                self._answer(True)

            def do_HEAD(self) -> None:
                self._answer(False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def write_project(directory: Path, index: PackageIndex, channel: CondaChannel, base: str) -> Path:
    """envbuild.toml (installer pip: no uv wheel to carry) and its envbuild.lock, written from the
    lock model as `envbuild lock` would write it."""
    return write_locked_project(
        directory,
        index=index,
        channel=channel,
        base_image=base,
        wheels=WHEELS,
        conda=CONDA,
        targets=("default",),
        installer="pip",
    )


def file_bytes(index: PackageIndex, channel: CondaChannel, registry: StaticRegistry) -> tuple[int, int]:
    """(bytes of files served so far: wheels, conda files, blobs and manifests; requests so far)."""
    index.settle()
    wheels = sum(
        n * (index.directory / path.removeprefix("/files/")).stat().st_size
        for path, n in index.requests.items()
        if path.startswith("/files/")
    )
    conda = sum(
        n * (channel.root / path.lstrip("/")).stat().st_size
        for path, n in channel.requests.items()
        if path.endswith(".tar.bz2")
    )
    requests = sum(index.requests.values()) + sum(channel.requests.values()) + registry.requests
    return wheels + conda + registry.served, requests


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-vendor-") as scratch:
        root = Path(scratch)
        for name in WHEELS:
            build_wheel(root / "wheels", name, "1.0", ["lib"] if name == "app" else [])
        channel = CondaChannel(root / "channel")
        for file in CONDA:
            channel.add(file.name, file.version, file.build, subdir=file.subdir)
        channel.index()
        registry = StaticRegistry("bench/vendor-base")
        digest = registry.image()
        with PackageIndex(root / "wheels") as index, channel, registry:
            base = f"{registry.host}/bench/vendor-base:latest@{digest}"
            spec = write_project(root / "project", index, channel, base)
            env = {**os.environ, "ENVBUILD_CACHE_DIR": str(root / "cache")}

            def vendor(bundle: Path) -> tuple[float, int, int, str]:
                before, asked = file_bytes(index, channel, registry)
                start = time.perf_counter()
                done = subprocess.run(
                    [ENVBUILD, "vendor", "-q", "-f", str(spec), "-o", str(bundle)],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                seconds = time.perf_counter() - start
                if done.returncode != 0:
                    raise SystemExit(f"envbuild vendor failed:\n{done.stderr[-2000:]}")
                after, asked_after = file_bytes(index, channel, registry)
                return seconds, after - before, asked_after - asked, done.stdout.strip()

            firsts = [vendor(root / f"bundle{n}") for n in range(RUNS)]
            noops = [vendor(root / f"bundle{RUNS - 1}") for _ in range(RUNS)]
    first = statistics.median(r[0] for r in firsts)
    noop = statistics.median(r[0] for r in noops)
    files = re.search(r": (\d+) files, ([^(]+) \(", firsts[-1][3])
    what = f"{files.group(1)} files, {files.group(2).strip()}" if files else firsts[-1][3]
    print(
        f"envbuild vendor, {len(WHEELS)} wheels, {len(CONDA)} conda files and a one-layer base image "
        f"({LAYER_BYTES >> 20} MiB) on loopback: {what}"
    )
    print(
        f"  first run, empty bundle     {first * 1000:8.0f} ms   fetched {firsts[-1][1]:>9} bytes "
        f"in {firsts[-1][2]} requests   (baseline)"
    )
    print(
        f"  second run, no-op           {noop * 1000:8.0f} ms   fetched {noops[-1][1]:>9} bytes "
        f"in {noops[-1][2]} requests   no-op/first {noop / first:.2f}"
    )
    print(f"  vendor's own summary of the no-op: {noops[-1][3]}")
    ok = all(r[1] == 0 for r in noops)
    print(f"target: the no-op run fetches no file: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
