"""The docker CLI, for tests that check what envbuild did on a real Engine (never to do envbuild's work).

The base image is Debian bookworm made locally with debootstrap and `docker import` (no registry is
reachable), and the wheelhouse holds torch 2.13.0 for Python 3.11 from `pip download`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from envbuild.cli.app import main

T = TypeVar("T")

BASE_IMAGE = "envbuild-test/bookworm:latest"
ARM64_BASE_IMAGE = "envbuild-test/bookworm-arm64:latest"
# TORCH_SPEC built once per session (tests/engine/conftest.py), under each xdist worker's own tag: a
# worker removes its tag when its session ends, while another may still be using its own
TORCH_IMAGE = f"envbuild-test/torch:session-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
ARM64_BASE_LOCK = "ENVBUILD_TEST_ARM64_BASE_LOCK"  # .ci/run: held while it builds ARM64_BASE_IMAGE
ARM64_BASE_LOG = "ENVBUILD_TEST_ARM64_BASE_LOG"  # .ci/run: that build's log
# what the arm64 base gets at debootstrap time: the rendered Dockerfile's own apt-get install then
# finds them installed, instead of unpacking them under QEMU (see make_bookworm_arm64_image)
ARM64_INCLUDE = ("python3", "python3-venv", "ca-certificates")
TORCH_SPEC = """
[stack]
driver = "580"
framework = "torch==2.13.0"
python = "3.11"
os = "debian12"
strategy = "wheels"

[packages]
pip = ["six==1.16.0"]

[smoke]
device = "cpu"
"""


def docker_cli() -> str:
    """A client that speaks BuildKit: Debian's docker.io binary when the first on PATH lacks buildx."""
    for candidate in (os.environ.get("DOCKER_CLI"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("no docker client found (install docker.io)")


def docker(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    return subprocess.run(
        [docker_cli(), *args], capture_output=True, text=True, check=check, env=env, **kwargs
    )


def make_bookworm_image(scratch: Path) -> str:
    """BASE_IMAGE, imported from a debootstrap'd Debian bookworm unless the Engine has it already."""
    if docker("image", "inspect", BASE_IMAGE, check=False).returncode == 0:
        return BASE_IMAGE
    root = scratch / "rootfs"
    subprocess.run(
        ["debootstrap", "--variant=minbase", "bookworm", str(root)],  # debootstrap's default mirror
        check=True,
        capture_output=True,
    )
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        [docker_cli(), "import", "-", BASE_IMAGE], stdin=tar.stdout, check=True, capture_output=True
    )
    tar.wait()
    return BASE_IMAGE


def make_bookworm_arm64_image(scratch: Path) -> str:
    """ARM64_BASE_IMAGE, a real linux/arm64 Debian bookworm, unless the Engine has it already.

    mmdebstrap (or debootstrap) --arch=arm64 runs the packages' scripts through QEMU (binfmt_misc).
    `docker import --platform` on Engine 20.10 still labels the image amd64, and BuildKit then tries
    to pull it; a
    BuildKit build of `FROM scratch` + `ADD rootfs.tar /` with --platform linux/arm64 gives an image
    that later FROM lines for linux/arm64 use from the Engine.

    .ci/run builds it in the background while the tests start: then this waits for that job first."""
    wait_for_ci_arm64_base()
    if docker("image", "inspect", ARM64_BASE_IMAGE, check=False).returncode == 0:
        return ARM64_BASE_IMAGE
    if os.environ.get(ARM64_BASE_LOG):
        log = Path(os.environ[ARM64_BASE_LOG])
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        pytest.fail(f".ci/run's background build of {ARM64_BASE_IMAGE} ended without the image: {tail}")
    context = scratch / "context"
    context.mkdir()
    tarball = context / "rootfs.tar"
    include = f"--include={','.join(ARM64_INCLUDE)}"
    if shutil.which("mmdebstrap"):  # what .ci/run uses: one apt run under emulation, a tarball out
        command = ["mmdebstrap", "--arch=arm64", "--variant=minbase", include, "bookworm", str(tarball)]
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, f"mmdebstrap --arch=arm64 failed: {done.stderr[-2000:]}"
    else:
        root = scratch / "rootfs"
        command = ["debootstrap", "--arch=arm64", "--variant=minbase", include, "bookworm", str(root)]
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, (
            f"debootstrap --arch=arm64 failed (is qemu-aarch64 enabled?): {done.stdout[-2000:]}"
        )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):  # 90 MB the image needs not
            for entry in (root / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
    (context / "Dockerfile").write_text('FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n')
    built = docker("build", "--platform", "linux/arm64", "-t", ARM64_BASE_IMAGE, str(context), check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    shutil.rmtree(context, ignore_errors=True)
    return ARM64_BASE_IMAGE


def wait_for_ci_arm64_base() -> None:
    """Block while .ci/run's background job that builds ARM64_BASE_IMAGE runs: it holds an flock on the
    file ENVBUILD_TEST_ARM64_BASE_LOCK names from before it starts until it ends, however it ends, so
    taking the lock here is the wait (no clock, no polling). Without the variable, no job runs."""
    lock = os.environ.get(ARM64_BASE_LOCK)
    if lock and os.path.exists(lock):
        with open(lock) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)


def exports_while(action: Callable[[], T], *images: str) -> tuple[T, list[str]]:
    """action()'s answer, and which of `images` (ids) the Engine exported (`docker save`) meanwhile,
    as its own event log has them; another test's exports of other images are not counted."""
    since = f"{time.time():.6f}"
    answer = action()
    until = f"{time.time():.6f}"
    events = docker(
        "events",
        "--since",
        since,
        "--until",
        until,
        "--filter",
        "type=image",
        "--filter",
        "event=save",
        "--format",
        "{{.Actor.ID}}",
    )
    return answer, [image for image in events.stdout.split() if image in images]


def architecture(image: str) -> str:
    """The image config's os/architecture, as the Engine records it: linux/arm64."""
    return docker("image", "inspect", image, "--format", "{{.Os}}/{{.Architecture}}").stdout.strip()


def render_and_build(workdir: Path, spec_text: str, wheelhouse: Path, base: str, tag: str) -> tuple[str, str]:
    """`envbuild render` a spec air-gapped, then `docker build` it by hand: (build output, Dockerfile)."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / "envbuild.toml"
    spec.write_text(spec_text, encoding="utf-8")
    out = workdir / "build"
    rendered = main(
        ["render", "-f", str(spec), "-o", str(out), "--wheelhouse", str(wheelhouse), "--base-image", base]
    )
    assert rendered == 0
    context = out / "default"
    built = docker("build", "--progress=plain", "-t", tag, str(context), check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built.stdout + built.stderr, (context / "Dockerfile").read_text()


def layers(tag: str) -> list[str]:
    return json.loads(docker("image", "inspect", tag, "--format", "{{json .RootFS.Layers}}").stdout)


def wait_while_running(process: subprocess.Popen[str], found: Callable[[], T]) -> T:
    """found()'s first truthy answer, asked again while `process` runs; the test fails with the
    process's output when it ends first. No clock: the process's own deadlines (the smoke step's
    timeout, the Engine's) bound the wait, so no test asserts how long something took."""
    while True:
        answer = found()
        if answer:
            return answer
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the process ended (exit {process.returncode}) first: {(out + err)[-2000:]}")
        time.sleep(0.1)


def exit_code_or_gone(container: str) -> int | None:
    """`docker wait`: the container's exit code once it has stopped, or None when it no longer exists
    (removed before or while waiting). Blocks while it runs."""
    done = docker("wait", container, check=False)
    if done.returncode != 0:
        assert "No such container" in done.stderr, done.stderr
        return None
    return int(done.stdout.strip())
