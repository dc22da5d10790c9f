"""A real conda channel on loopback, for tests and benchmarks: small real packages, indexed by
rattler's own indexer, served over HTTP.

conda-forge cannot be reached from CI, so the conda layer is locked, checked and installed against
this: `.tar.bz2` packages with a real `info/index.json` and `info/paths.json` and one file each, in
`<subdir>/` folders, `repodata.json` written by `rattler.index.index_fs`::

    with CondaChannel(tmp_path) as channel:
        channel.add("cuda-version", "12.8", "h0_0", constrains=["__cuda >=12"])
        channel.index()
        ... channel.url ...

Routes are the channel's files; `requests` counts each path served. A package added after `index()`
needs `index()` again.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

TIMESTAMP_MS = 1_700_000_000_000  # a fixed build time: the same package gives the same bytes


class CondaChannel:
    def __init__(self, directory: Path) -> None:
        self.root = Path(directory)
        for subdir in ("linux-64", "linux-aarch64", "noarch"):
            (self.root / subdir).mkdir(parents=True, exist_ok=True)
        self.requests: Counter[str] = Counter()
        self._stamp = 0  # the last repodata mtime index() set, in whole seconds
        self._server: ThreadingHTTPServer | None = None

    def add(
        self,
        name: str,
        version: str,
        build: str,
        depends: Sequence[str] = (),
        *,
        constrains: Sequence[str] = (),
        subdir: str = "linux-64",
    ) -> Path:
        """Write one package file; its path."""
        index = {
            "name": name,
            "version": version,
            "build": build,
            "build_number": 0,
            "depends": list(depends),
            "constrains": list(constrains),
            "subdir": subdir,
            "license": "MIT",
            "timestamp": TIMESTAMP_MS,
        }
        if subdir == "noarch":
            index["noarch"] = "generic"
        payload = f"{name} {version} {build}\n".encode()
        relative = f"share/envbuild-test/{name}.txt"
        paths = {
            "paths": [
                {
                    "_path": relative,
                    "path_type": "hardlink",
                    "sha256": hashlib.sha256(payload).hexdigest(),
                    "size_in_bytes": len(payload),
                }
            ],
            "paths_version": 1,
        }
        path = self.root / subdir / f"{name}-{version}-{build}.tar.bz2"
        with tarfile.open(path, "w:bz2") as archive:
            for member, data in (
                ("info/index.json", json.dumps(index, sort_keys=True).encode()),
                ("info/paths.json", json.dumps(paths, sort_keys=True).encode()),
                (relative, payload),
            ):
                info = tarfile.TarInfo(member)
                info.size, info.mtime = len(data), 0
                archive.addfile(info, io.BytesIO(data))
        return path

    def index(self) -> None:
        """repodata.json for every subdir (plain JSON only: no .zst, no shards). Each call's files
        are a second newer than the last call's: HTTP's Last-Modified counts whole seconds, so a
        client revalidating its cache (If-Modified-Since) sees a channel changed within a second."""
        import rattler.index

        asyncio.run(rattler.index.index_fs(self.root, write_zst=False, write_shards=False, force=True))
        for subdir in ("linux-64", "linux-aarch64", "noarch"):
            repodata = self.root / subdir / "repodata.json"
            if not repodata.exists():  # an empty subdir still answers, as a real channel's does
                empty = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
                repodata.write_text(json.dumps(empty))
        self._stamp = max(self._stamp + 1, int(time.time()))
        for subdir in ("linux-64", "linux-aarch64", "noarch"):
            os.utime(self.root / subdir / "repodata.json", (self._stamp, self._stamp))

    def start(self) -> CondaChannel:
        channel = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                channel.requests[self.path] += 1
                super().do_GET()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(self.root)))
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> CondaChannel:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start the channel first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def file_sha256(self, subdir: str, filename: str) -> str:
        return "sha256:" + hashlib.sha256((self.root / subdir / filename).read_bytes()).hexdigest()


def gpu_channel(directory: Path) -> CondaChannel:
    """The channel issue 21's tests solve against: a python, two cuda-version releases, a framework
    with a cuda12* and a cuda13* build of one version, and a user package with a dependency."""
    channel = CondaChannel(directory)
    channel.add("python", "3.11.9", "h0_0_cpython")
    channel.add("cuda-version", "12.8", "h0_0", constrains=["__cuda >=12"])
    channel.add("cuda-version", "13.0", "h0_0", constrains=["__cuda >=13"])
    for major in ("12", "13"):
        channel.add(
            "fw",
            "2.5.0",
            f"cuda{major}_py311_0",
            ["python >=3.11,<3.12", f"cuda-version >={major},<{int(major) + 1}", "__cuda"],
        )
    channel.add("app", "1.0", "h0_0", ["lib >=2"])
    channel.add("lib", "2.0", "pyh0_0", subdir="noarch")
    channel.add("lib", "1.0", "pyh0_0", subdir="noarch")
    channel.index()
    return channel


def stack_channel(
    directory: Path,
    conda_framework: Sequence[str],
    *,
    python: str,
    cudas: Sequence[str] = ("12.9", "13.0"),
) -> CondaChannel:
    """A channel that holds what a conda-strategy plan asks for, so a real spec locks against it:
    `conda_framework` as the plan gives it (`("jax=0.12.0.1", "jaxlib=0.12.0.1=cuda13*")`), the last
    spec's package built once per CUDA major of `cudas` (`cuda12_py312_0`, constrained on
    cuda-version and __cuda like conda-forge's), the others noarch and depending on it; a `python`
    X.Y.0 for `python`, `pip`, a cuda-version per entry of `cudas`, and the user package `app`
    (needs lib >=2) with `lib` 1.0 and 2.0. Not indexed: add to it, then call `index()`."""
    channel = CondaChannel(directory)
    py = python.replace(".", "")
    channel.add("python", f"{python}.0", "h0_0_cpython")
    channel.add("pip", "25.0", "pyh0_0", [f"python >={python}"], subdir="noarch")
    for cuda in cudas:
        major = int(cuda.split(".")[0])
        channel.add("cuda-version", cuda, "h0_0", constrains=[f"__cuda >={major}", f"cudatoolkit {major}.*"])
    *others, gpu = [spec.split("=") for spec in conda_framework]
    version = gpu[1]
    for major in sorted({cuda.split(".")[0] for cuda in cudas}):
        channel.add(
            gpu[0],
            version,
            f"cuda{major}_py{py}_0",
            [f"python >={python},<{python}.999", f"cuda-version >={major},<{int(major) + 1}", "__cuda"],
        )
    for name, *_ in others:
        channel.add(name, version, "pyh0_0", [f"{gpu[0]} =={version}", f"python >={python}"], subdir="noarch")
    channel.add("app", "1.0", "h0_0", ["lib >=2"])
    channel.add("lib", "2.0", "pyh0_0", subdir="noarch")
    channel.add("lib", "1.0", "pyh0_0", subdir="noarch")
    return channel
