"""A locked project for the `envbuild vendor` tests, on real loopback services: a Python index with
small wheels and uv's own wheel, a conda channel, and a one-layer base image pushed over the registry
API under a test-unique name. The lock is written through envbuild's own lock model and read back."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import uuid
from pathlib import Path

import requests

from envbuild import __version__
from envbuild._testing.condachannel import CondaChannel
from envbuild._testing.pyindex import PackageIndex, build_wheel
from envbuild.lockfile.model import (
    Lock,
    LockedCondaPackage,
    LockedPackage,
    LockedTarget,
    lock_path,
    write_lock,
)
from envbuild.matrix.load import load_matrix
from envbuild.spec.model import load_spec
from tests.helpers.capability import missing

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def uv_wheel(variable: str) -> Path:
    """uv's wheel from the CI wheelhouse named by `variable` (ENVBUILD_TEST_WHEELHOUSE[_ARM64])."""
    directory = os.environ.get(variable)
    found = sorted(Path(directory).glob("uv-*.whl")) if directory else []
    if not found:
        missing(f"{variable} holds no uv wheel")
    return found[0]


def push_image(host: str, repo: str, tag: str = "latest") -> str:
    """A one-layer OCI image as host/repo:tag over the registry API; its manifest digest."""
    data = b"envbuild vendor test layer " + repo.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("etc/envbuild-vendor-test")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    layer = gzip.compress(buffer.getvalue(), mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {
                "type": "layers",
                "diff_ids": ["sha256:" + hashlib.sha256(buffer.getvalue()).hexdigest()],
            },
            "config": {},
        }
    ).encode()

    def blob(body: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        started = requests.post(f"http://{host}/v2/{repo}/blobs/uploads/", timeout=10)
        location = started.headers["Location"]
        url = location if "://" in location else f"http://{host}{location}"
        assert requests.put(url, params={"digest": digest}, data=body, timeout=10).status_code == 201
        return {"digest": digest, "size": len(body)}

    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(layer)}],
        }
    ).encode()
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{tag}",
        data=manifest,
        headers={"Content-Type": OCI_MANIFEST},
        timeout=10,
    )
    assert stored.status_code == 201, stored.text
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


def unique_repo(prefix: str) -> str:
    return f"envbuild-test/{prefix}-{uuid.uuid4().hex[:12]}"


def wheel_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def python_index_dir(directory: Path) -> Path:
    """Small wheels (app 1.0 needing lib, lib 1.0) and uv's x86_64 wheel, for the PackageIndex."""
    build_wheel(directory, "app", "1.0", ["lib"])
    build_wheel(directory, "lib", "1.0")
    shutil.copy(uv_wheel("ENVBUILD_TEST_WHEELHOUSE"), directory)
    return directory


def conda_channel_dir(directory: Path) -> CondaChannel:
    channel = CondaChannel(directory)
    channel.add("python", "3.11.9", "h0_0")
    channel.add("tool", "1.0", "pyhd8ed1ab_0", ["python"], subdir="noarch")
    channel.index()
    return channel


def write_project(
    directory: Path, index: PackageIndex, channel: CondaChannel, base_image: str, *, targets: int = 1
) -> Path:
    """envbuild.toml (its [packages] index-url the loopback index) and its envbuild.lock: `targets`
    conda targets sharing the same files and base. The spec's path."""
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "envbuild.toml"
    spec_path.write_text(
        '[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = ["app"]\nindex-url = "{index.url}"\n'
    )
    spec = load_spec(str(spec_path))
    packages = tuple(
        LockedPackage(
            name=name,
            version="1.0",
            layer="user",
            index=index.url,
            hashes=(wheel_hash(index.directory / f"{name}-1.0-py3-none-any.whl"),),
        )
        for name in ("app", "lib")
    )
    conda = (
        LockedCondaPackage(
            name="python",
            version="3.11.9",
            build="h0_0",
            layer="framework",
            channel=channel.url,
            subdir="linux-64",
            url=f"{channel.url}/linux-64/python-3.11.9-h0_0.tar.bz2",
            sha256=channel.file_sha256("linux-64", "python-3.11.9-h0_0.tar.bz2"),
        ),
        LockedCondaPackage(
            name="tool",
            version="1.0",
            build="pyhd8ed1ab_0",
            layer="user",
            channel=channel.url,
            subdir="noarch",
            url=f"{channel.url}/noarch/tool-1.0-pyhd8ed1ab_0.tar.bz2",
            sha256=channel.file_sha256("noarch", "tool-1.0-pyhd8ed1ab_0.tar.bz2"),
        ),
    )
    entries = tuple(
        LockedTarget(
            name=f"t{number}",
            platform="linux/amd64",
            strategy="conda",
            python="3.11",
            base_image=base_image,
            requirements=("app",),
            stack=(("framework", "torch"),),
            packages=packages,
            conda=conda,
        )
        for number in range(targets)
    )
    lock = Lock(
        envbuild=__version__, spec_digest=spec.digest, matrix_digest=load_matrix().digest, targets=entries
    )
    write_lock(lock_path(str(spec_path)), lock)
    return spec_path
