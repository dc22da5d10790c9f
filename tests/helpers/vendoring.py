"""A locked project for the `envbuild vendor` tests, on real loopback services: a Python index with
small wheels and uv's own wheel, a conda channel, and a one-layer base image pushed over the registry
API under a test-unique name. The lock is written through envbuild's own lock model and read back
(envbuild._testing.lockedproject, which bench/vendor.py shares)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import requests

from envbuild._testing.condachannel import CondaChannel
from envbuild._testing.lockedproject import (
    OCI_MANIFEST,
    CondaFile,
    one_layer_image,
    write_locked_project,
)
from envbuild._testing.pyindex import PackageIndex, build_wheel
from tests.helpers.capability import missing


def uv_wheel(variable: str) -> Path:
    """uv's wheel from the CI wheelhouse named by `variable` (ENVBUILD_TEST_WHEELHOUSE[_ARM64])."""
    directory = os.environ.get(variable)
    found = sorted(Path(directory).glob("uv-*.whl")) if directory else []
    if not found:
        missing(f"{variable} holds no uv wheel")
    return found[0]


def push_image(host: str, repo: str, tag: str = "latest") -> str:
    """A one-layer OCI image as host/repo:tag over the registry API; its manifest digest."""
    image = one_layer_image("etc/envbuild-vendor-test", b"envbuild vendor test layer " + repo.encode())
    for digest, body in image.blobs.items():
        started = requests.post(f"http://{host}/v2/{repo}/blobs/uploads/", timeout=10)
        location = started.headers["Location"]
        url = location if "://" in location else f"http://{host}{location}"
        assert requests.put(url, params={"digest": digest}, data=body, timeout=10).status_code == 201
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{tag}",
        data=image.manifest,
        headers={"Content-Type": OCI_MANIFEST},
        timeout=10,
    )
    assert stored.status_code == 201, stored.text
    return image.digest


def unique_repo(prefix: str) -> str:
    return f"envbuild-test/{prefix}-{uuid.uuid4().hex[:12]}"


def python_index_dir(directory: Path) -> Path:
    """Small wheels (app 1.0 needing lib, lib 1.0) and uv's x86_64 wheel, for the PackageIndex."""
    build_wheel(directory, "app", "1.0", ["lib"])
    build_wheel(directory, "lib", "1.0")
    shutil.copy(uv_wheel("ENVBUILD_TEST_WHEELHOUSE"), directory)
    return directory


CONDA_FILES = (
    CondaFile(name="python", version="3.11.9", build="h0_0", subdir="linux-64"),
    CondaFile(name="tool", version="1.0", build="pyhd8ed1ab_0", subdir="noarch"),
)


def conda_channel_dir(directory: Path) -> CondaChannel:
    channel = CondaChannel(directory)
    channel.add("python", "3.11.9", "h0_0")
    channel.add("tool", "1.0", "pyhd8ed1ab_0", ["python"], subdir="noarch")
    channel.index()
    return channel


def write_project(
    directory: Path, index: PackageIndex, channel: CondaChannel, base_image: str, *, targets: int = 1
) -> Path:
    """envbuild.toml and its envbuild.lock: `targets` conda targets (t0, t1, ...) sharing the same
    wheels (app, lib), conda files and base. The spec's path."""
    return write_locked_project(
        directory,
        index=index,
        channel=channel,
        base_image=base_image,
        wheels=("app", "lib"),
        conda=CONDA_FILES,
        targets=tuple(f"t{number}" for number in range(targets)),
    )
