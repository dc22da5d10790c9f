"""The torch wheelhouse image pushed by digest to the test registry, for the runtimes that pull from
a registry (Charliecloud, Apptainer, Enroot): built once per module, from the Engine's build cache
when another module built the same spec, and its manifest deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

from envbuild.oci.registry import resolve_digest
from tests.helpers.docker import TORCH_SPEC, docker, render_and_build
from tests.helpers.registry import delete_manifest


def pushed_torch_image(
    workdir: Path, wheelhouse: Path, base: str, registry: str, repository: str
) -> Iterator[str]:
    """REGISTRY/REPOSITORY@sha256:... of the torch image; yields it, then deletes the manifest and
    the local tags it made."""
    local = f"envbuild-test/{repository.rsplit('/', 1)[-1]}:torch"
    render_and_build(workdir, TORCH_SPEC, wheelhouse, base, local)
    candidate = f"{registry}/{repository}:{uuid.uuid4().hex[:8]}"
    docker("tag", local, candidate)
    docker("push", "--quiet", candidate)
    digest = resolve_digest(candidate)
    try:
        yield f"{registry}/{repository}@{digest}"
    finally:
        delete_manifest(registry, repository, digest)
        docker("rmi", candidate, local, check=False)
        # the `docker pull` by digest of a runtime's fetch leaves a REPO@sha256 reference
        docker("rmi", f"{registry}/{repository}@{digest}", check=False)
