"""A locked conda project for render and install tests: the jax-conda example's spec, a loopback conda
channel whose packages carry the names the matrix gives that spec (python, cuda-version, jaxlib with
a cuda13* build, jax, and the spec's optax), and an envbuild.lock whose conda layer rattler solved
from that channel, written next to the spec as `envbuild lock` writes it.

The solve is `envbuild lock`'s own (lock.condalayer.lock_conda): the framework layer from python,
cuda-version, the framework's match specs and pip; the user layer from the spec's [packages] conda
with the framework layer held at its exact builds, keeping what it adds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from envbuild import __version__
from envbuild._testing.condachannel import CondaChannel
from envbuild.lock.condalayer import lock_conda
from envbuild.lock.locker import locked_target
from envbuild.lockfile.model import Lock, LockedCondaPackage, LockedPackage, LockedTarget, dumps, lock_path
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import Plan, build_plan
from envbuild.spec.model import Spec, load_spec
from tests.helpers.paths import EXAMPLES

EXAMPLE = EXAMPLES / "jax-conda" / "envbuild.toml"
# micromamba's base, pinned as a lock pins it (the digest is a stand-in: nothing here pulls it)
LOCKED_BASE = "mambaorg/micromamba:2.6.1@sha256:" + "1" * 64
EINOPS_HASH = "sha256:" + "e" * 64  # the pip layer's pin: render copies it, nothing installs it here


def example_channel(directory: Path, plan: Plan) -> CondaChannel:
    """A channel that solves `plan`'s conda specs: its python, its CUDA's cuda-version, the
    framework's packages at its version (the GPU one with cuda<major> builds for 12 and 13), a
    native library the framework links, and the spec's conda packages (optax, noarch)."""
    channel = CondaChannel(directory)
    python = plan.python
    py = python.replace(".", "")
    cuda = plan.stack_document["cuda"]
    major = int(cuda.split(".")[0])
    channel.add("python", f"{python}.9", "h0_0_cpython", ["libzstd >=1.5"])
    channel.add("libzstd", "1.5.7", "h0_0")
    channel.add("pip", "25.0", "pyh0_0", [f"python >={python}"], subdir="noarch")
    for version in ("12.8", "13.0"):
        channel.add("cuda-version", version, "h0_0", constrains=[f"__cuda >={version.split('.')[0]}"])
    *pure, gpu = [spec.split("=")[0] for spec in plan.conda_framework]
    version = plan.stack.release.version
    next_python = f"{python.split('.')[0]}.{int(python.split('.')[1]) + 1}"
    for build_major in (12, 13):
        channel.add(
            gpu,
            version,
            f"cuda{build_major}_py{py}_0",
            [
                f"python >={python},<{next_python}",
                f"cuda-version >={build_major},<{build_major + 1}",
                "libzstd >=1.5",
                "__cuda",
            ],
        )
    for name in pure:
        channel.add(name, version, "pyhd8ed1ab_0", [f"{gpu} {version}.*", "python"], subdir="noarch")
    for spec in plan.conda:
        channel.add(spec, "0.2.5", "pyhd8ed1ab_0", [f"{pure[0] if pure else gpu} >=0.4"], subdir="noarch")
    assert major in (12, 13)
    channel.index()
    return channel


def conda_layer(plan: Plan, channel_url: str) -> tuple[LockedCondaPackage, ...]:
    """The plan's conda layer as `envbuild lock` solves it (lock.condalayer), from the channel."""
    return lock_conda(plan, (channel_url,))


def locked_project(directory: Path, matrix: Matrix, channel_url: str, spec_text: str | None = None) -> Path:
    """directory/envbuild.toml (the jax-conda example, or `spec_text`) and its envbuild.lock, whose
    conda layer comes from the channel at `channel_url`. The spec's path."""
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "envbuild.toml"
    if spec_text is None:
        shutil.copyfile(EXAMPLE, spec_path)
    else:
        spec_path.write_text(spec_text)
    spec = load_spec(str(spec_path))
    write_lock(spec, matrix, lock_for(spec, matrix, channel_url))
    return spec_path


def lock_for(spec: Spec, matrix: Matrix, channel_url: str) -> LockedTarget:
    """The spec's first target locked: its conda layer from the channel, its pip layer pinned."""
    target = spec.targets[0]
    plan = build_plan(matrix, spec, target)
    packages = tuple(
        LockedPackage(
            name=requirement.split("==")[0],
            version=requirement.split("==")[1],
            layer="user",
            index=plan.index_url,
            hashes=(EINOPS_HASH,),
        )
        for requirement in plan.pip
    )
    return locked_target(plan, LOCKED_BASE, packages, conda=conda_layer(plan, channel_url))


def write_lock(spec: Spec, matrix: Matrix, *targets: LockedTarget) -> Path:
    lock = Lock(envbuild=__version__, spec_digest=spec.digest, matrix_digest=matrix.digest, targets=targets)
    path = Path(lock_path(spec.path))
    path.write_text(dumps(lock))
    return path


def example_plan(matrix: Matrix) -> Plan:
    spec = load_spec(str(EXAMPLE))
    return build_plan(matrix, spec, spec.targets[0])
