"""Issue 18 on the real Engine: the lock's CUDA wheels in a layer of their own, which a framework patch
release leaves byte-identical (same digest), and uv in none of the image's layers.

Two projects lock a stand-in torch 2.12.0 and 2.12.1 that both require real CUDA 13.0 wheels from PyPI
(envbuild/_testing/cudalayers.py), on a base pushed to the loopback registry (a lock pins its digest).
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from envbuild._testing.cudalayers import FRAMEWORK_VERSIONS, cuda_wheelhouse, layers_through, lock_and_render
from envbuild._testing.pyindex import PackageIndex
from tests.helpers.docker import docker, docker_cli, layers
from tests.helpers.registry import push

pytestmark = pytest.mark.docker
CUDA_RUN = "-r /opt/envbuild/requirements-cuda.txt"


@pytest.fixture
def pushed_base(bookworm_image: str, anonymous_registry: str):
    """The bookworm base plus a layer holding a nonce: a base no earlier run has built on. On the
    shared base, the Engine's cache holds a record of the apt step from each earlier run and hands
    each build the one whose later steps it also has, so the two images differed from the apt layer
    on; on this base, both builds can only share the records this run makes."""
    nonce = str(time.time_ns())
    ref = f"{anonymous_registry}/envbuild-test/cuda-layer-base:{nonce}"
    subprocess.run(
        [docker_cli(), "build", "-q", "-t", ref, "-"],
        input=f"FROM {bookworm_image}\nRUN echo {nonce} > /etc/envbuild-test-nonce\n",
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},  # the classic builder uses the local image as is
    )
    push(ref)
    yield ref
    docker("rmi", ref, check=False)


def files_in_layers(tag: str) -> set[str]:
    """Every path any layer of the image holds (`docker save`), deleted or not in the final view."""
    saved = subprocess.run([docker_cli(), "save", tag], capture_output=True, check=True).stdout
    paths: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(saved)) as image:
        for member in image.getmembers():
            if member.name.endswith("layer.tar"):
                layer = image.extractfile(member)
                assert layer is not None
                with tarfile.open(fileobj=layer) as inner:
                    paths.update(m.name for m in inner.getmembers() if m.isfile())
    return paths


def test_a_framework_patch_release_keeps_the_cuda_layer_and_no_layer_holds_uv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pushed_base: str, images: list[str]
) -> None:
    wheelhouse = cuda_wheelhouse(tmp_path / "wheels")
    built = []
    with PackageIndex(wheelhouse) as index:
        for version in FRAMEWORK_VERSIONS:
            code, context = lock_and_render(tmp_path / version, version, index.url, wheelhouse, pushed_base)
            assert code == 0, capsys.readouterr().err
            tag = f"envbuild-test/cuda-layer:{version}"
            images.append(tag)
            done = docker("build", "--progress=plain", "-t", tag, str(context), check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            built.append((tag, (context / "Dockerfile").read_text(), done.stderr))
    capsys.readouterr()
    (old, dockerfile, _), (new, _, log) = built
    assert "/opt/envbuild-uv/uv pip install" in dockerfile and "--require-hashes" in dockerfile
    through_cuda = layers_through(dockerfile, CUDA_RUN, len(layers(pushed_base)))
    first, second = layers(old), layers(new)
    # the CUDA layer (and all below it) is the same blob in both images; the framework's are not
    assert first[:through_cuda] == second[:through_cuda]
    assert first[through_cuda:] != second[through_cuda:] and len(first) == len(second)
    step = next(line for line in log.splitlines() if CUDA_RUN in line and "RUN" in line).split()[0]
    assert f"{step} CACHED" in log
    ran = docker(
        "run",
        "--rm",
        "--network",
        "none",
        new,
        "python",
        "-c",
        "import importlib.metadata as m; print(*(m.version(p) for p in "
        "('torch', 'nvidia-cuda-runtime', 'nvidia-nvtx')))",
    )
    assert ran.stdout.split() == ["2.12.1", "13.0.96", "13.0.85"]
    # uv did the installs, yet no layer of the image holds it: it came in by a bind mount
    paths = files_in_layers(new)
    assert any(p.startswith("opt/venv/lib/python3.11/site-packages/nvidia/") for p in paths)
    assert not [p for p in paths if os.path.basename(p) in ("uv", "uvx")]
    # (the bind mount's target stays behind as an empty directory, as /wheels/* do)
    absent = docker(
        "run", "--rm", new, "sh", "-c", "command -v uv; find /opt/envbuild-uv -type f", check=False
    )
    assert absent.stdout == ""
