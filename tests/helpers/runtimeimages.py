"""The session's torch image pushed by digest into a repository of the test's own, for the runtimes
that pull from a registry (Charliecloud, Apptainer, Enroot): a push of layers the registry already
holds mounts them, so each module's copy costs a manifest; the manifest is deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from envbuild.oci.registry import resolve_digest
from tests.helpers.docker import docker
from tests.helpers.registry import delete_manifest


def pushed_torch_image(image: str, registry: str, repository: str) -> Iterator[str]:
    """REGISTRY/REPOSITORY@sha256:... of `image` (the session's torch image); yields it, then deletes
    the manifest and the local references it made."""
    candidate = f"{registry}/{repository}:{uuid.uuid4().hex[:8]}"
    docker("tag", image, candidate)
    docker("push", "--quiet", candidate)
    digest = resolve_digest(candidate)
    try:
        yield f"{registry}/{repository}@{digest}"
    finally:
        delete_manifest(registry, repository, digest)
        docker("rmi", candidate, check=False)
        # the `docker pull` by digest of a runtime's fetch leaves a REPO@sha256 reference
        docker("rmi", f"{registry}/{repository}@{digest}", check=False)
