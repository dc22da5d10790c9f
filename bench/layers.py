"""The CUDA layer survives a framework patch release: what a push of the upgraded image sends.

Two projects whose locks differ only in the framework's patch release (a stand-in torch 2.12.0 and
2.12.1 that require the real CUDA 13.0 wheels nvidia-cuda-runtime and nvidia-nvtx from PyPI; see
envbuild/_testing/cudalayers.py) are locked, rendered air-gapped, built on the real Engine with
BuildKit and pushed to the loopback registry. Reported:
* whether the CUDA layer's digest is the same in both images, built on one builder (what a CI builder
  with a cache sees), and again when the second image is built with --no-cache (a fresh builder);
* the bytes each push sends: the compressed layers the registry did not hold yet.

Run: `.venv/bin/python bench/layers.py` (needs dockerd, /usr/bin/docker, the envbuild-test/bookworm
image the tests make, and a registry on ENVBUILD_TEST_REGISTRY or 127.0.0.1:5000).
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

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.dockercli import docker  # noqa: E402

BASE = "envbuild-test/bookworm:latest"
CUDA_RUN = "-r /opt/envbuild/requirements-cuda.txt"
MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def layer_blobs(registry: str, repository: str, tag: str) -> dict[str, int]:
    """The pushed manifest's layers: digest -> compressed size, what a push uploads."""
    response = requests.get(
        f"http://{registry}/v2/{repository}/manifests/{tag}", headers={"Accept": MANIFEST}, timeout=30
    )
    response.raise_for_status()
    return {layer["digest"]: layer["size"] for layer in response.json()["layers"]}


def main() -> int:
    from envbuild._testing.cudalayers import (
        FRAMEWORK_VERSIONS,
        cuda_wheelhouse,
        layers_through,
        lock_and_render,
    )
    from envbuild._testing.pyindex import PackageIndex

    registry = os.environ.get("ENVBUILD_TEST_REGISTRY", "127.0.0.1:5000")
    try:
        requests.get(f"http://{registry}/v2/", timeout=5)
    except requests.RequestException:
        print(f"needs a registry on {registry} (ENVBUILD_TEST_REGISTRY)")
        return 1
    if subprocess.run(["/usr/bin/docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        print(f"needs the {BASE} image (made by the tests: make test)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="envbuild-bench-layers-"))
    nonce = str(time.time_ns())  # fresh repository names: the registry keeps blobs between runs
    base = f"{registry}/envbuild-bench/cuda-base-{nonce}:latest"
    repository = f"envbuild-bench/cuda-layer-{nonce}"
    tags = [base]
    try:
        # a base layer holding the nonce: the Engine's cache has no record built on it from an
        # earlier run, so both builds below share only what this run builds
        subprocess.run(
            ["/usr/bin/docker", "build", "-q", "-t", base, "-"],
            input=f"FROM {BASE}\nRUN echo {nonce} > /etc/envbuild-bench-nonce\n",
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
        )
        docker("push", base)
        base_layers = len(
            json.loads(docker("image", "inspect", base, "--format", "{{json .RootFS.Layers}}").stdout)
        )
        wheels = cuda_wheelhouse(work / "wheels")
        images, contexts = [], []
        with PackageIndex(wheels) as index:
            for version in FRAMEWORK_VERSIONS:
                code, context = lock_and_render(work / version, version, index.url, wheels, base)
                if code != 0:
                    print(f"envbuild lock/render failed for torch {version}")
                    return 1
                tag = f"{registry}/{repository}:{version}"
                tags.append(tag)
                docker("build", "-q", "-t", tag, str(context))
                docker("push", tag)
                images.append(tag)
                contexts.append(context)
        dockerfile = (contexts[0] / "Dockerfile").read_text()
        through = layers_through(dockerfile, CUDA_RUN, base_layers)

        def rootfs(tag: str) -> list[str]:
            return json.loads(docker("image", "inspect", tag, "--format", "{{json .RootFS.Layers}}").stdout)

        first, second = rootfs(images[0]), rootfs(images[1])
        cold_tag = f"{registry}/{repository}:cold"
        tags.append(cold_tag)
        docker("build", "-q", "--no-cache", "-t", cold_tag, str(contexts[1]))
        cold = rootfs(cold_tag)
        base_blobs = layer_blobs(registry, base.split("/", 1)[1].rsplit(":", 1)[0], "latest")
        blobs = [layer_blobs(registry, repository, v) for v in FRAMEWORK_VERSIONS]
        sent_first = sum(size for digest, size in blobs[0].items() if digest not in base_blobs)
        sent_second = sum(
            size for digest, size in blobs[1].items() if digest not in base_blobs and digest not in blobs[0]
        )
        ordered = list(blobs[0].items())
        cuda_size = ordered[through - 1][1]
    finally:
        for tag in tags:
            subprocess.run(["/usr/bin/docker", "rmi", "-f", tag], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    same = first[through - 1] == second[through - 1]
    print(
        "CUDA layer reuse: stand-in torch 2.12.0 -> 2.12.1, "
        "real nvidia-cuda-runtime + nvidia-nvtx 13.0 wheels"
    )
    print(
        f"  CUDA layer digest, same builder      {'identical' if same else 'DIFFERENT'} "
        f"({first[through - 1][:19]})"
    )
    print(
        f"  CUDA layer digest, --no-cache build  "
        f"{'identical' if cold[through - 1] == first[through - 1] else 'different (fresh builder: README)'}"
    )
    print(f"  CUDA layer, compressed               {cuda_size / 1e6:7.2f} MB")
    print(f"  push of 2.12.0 sends                 {sent_first / 1e6:7.2f} MB (base already in the registry)")
    print(
        f"  push of 2.12.1 sends                 {sent_second / 1e6:7.2f} MB "
        f"({sent_second / sent_first:.1%} of the first): the framework layers only"
    )
    print(
        f"  with the CUDA wheels in the framework layer, as before: {(sent_second + cuda_size) / 1e6:.2f} MB "
        f"({(sent_second + cuda_size) / max(sent_second, 1):.0f}x; with torch's ~3 GB of CUDA wheels, ~3 GB)"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
