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

import gzip
import hashlib
import io
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild import __version__  # noqa: E402
from envbuild._testing.condachannel import CondaChannel  # noqa: E402
from envbuild._testing.pyindex import PackageIndex, build_wheel  # noqa: E402
from envbuild.lockfile.model import (  # noqa: E402
    Lock,
    LockedCondaPackage,
    LockedPackage,
    LockedTarget,
    lock_path,
    write_lock,
)
from envbuild.matrix.load import load_matrix  # noqa: E402
from envbuild.spec.model import load_spec  # noqa: E402

ENVBUILD = str(Path(sys.executable).with_name("envbuild"))
WHEELS = ("app", "click", "einops", "lib", "rich", "tqdm")  # a lock lists them by name
# python in the framework layer, then the user layer's by name
CONDA = (
    ("python", "3.11.9", "h0_0", "linux-64"),
    *((name, "1.0", "pyhd8ed1ab_0", "noarch") for name in ("attrs", "tool", "yaml")),
    ("zlib", "1.3.1", "h0_0", "linux-64"),
)
LAYER_BYTES = 4 << 20
RUNS = 3
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


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
        payload = random.Random(38).randbytes(LAYER_BYTES)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo("opt/payload.bin")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
        layer = gzip.compress(buffer.getvalue(), mtime=0)
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "rootfs": {"type": "layers", "diff_ids": [_digest(buffer.getvalue())]},
                "config": {},
            }
        ).encode()
        for body in (layer, config):
            self.blobs[_digest(body)] = body
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": _digest(config),
                    "size": len(config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": _digest(layer),
                        "size": len(layer),
                    }
                ],
            }
        ).encode()
        return _digest(self.manifest)

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
                elif path == f"{prefix}manifests/{_digest(registry.manifest)}":
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
                    self.send_header("Docker-Content-Digest", _digest(data))
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


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def write_project(directory: Path, index: PackageIndex, channel: CondaChannel, base: str) -> Path:
    """envbuild.toml (installer pip: no uv wheel to carry) and its envbuild.lock, written from the
    lock model as `envbuild lock` would write it."""
    directory.mkdir(parents=True)
    spec_path = directory / "envbuild.toml"
    spec_path.write_text(
        '[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = ["app"]\nindex-url = "{index.url}"\n\n[image]\ninstaller = "pip"\n'
    )
    spec = load_spec(str(spec_path))
    packages = tuple(
        LockedPackage(
            name=name,
            version="1.0",
            layer="user",
            index=index.url,
            hashes=(_digest((index.directory / f"{name}-1.0-py3-none-any.whl").read_bytes()),),
        )
        for name in WHEELS
    )
    conda = tuple(
        LockedCondaPackage(
            name=name,
            version=version,
            build=build,
            layer="framework" if name == "python" else "user",
            channel=channel.url,
            subdir=subdir,
            url=f"{channel.url}/{subdir}/{name}-{version}-{build}.tar.bz2",
            sha256=channel.file_sha256(subdir, f"{name}-{version}-{build}.tar.bz2"),
        )
        for name, version, build, subdir in CONDA
    )
    target = LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="conda",
        python="3.11",
        base_image=base,
        requirements=("app",),
        stack=(("framework", "torch"),),
        packages=packages,
        conda=conda,
    )
    matrix = load_matrix().digest
    lock = Lock(envbuild=__version__, spec_digest=spec.digest, matrix_digest=matrix, targets=(target,))
    write_lock(lock_path(str(spec_path)), lock)
    return spec_path


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
        for name, version, build, subdir in CONDA:
            channel.add(name, version, build, subdir=subdir)
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
