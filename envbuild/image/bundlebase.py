"""The base image of a bundle, loaded into the engine under a bundle-local name, for `build --bundle`.

The lock pins the base as name:tag@sha256:<manifest>. A loaded image has no RepoDigest (that comes
only from a pull or a push), so a `FROM name:tag@sha256:...` would make the builder ask the registry,
which an air-gapped machine cannot reach. The base is therefore loaded from the bundle's OCI layout,
checked to be the config the pinned manifest names (the engine's image ID is the config's digest),
and tagged `envbuild-bundle/<repository>:<first 12 hex of the manifest digest>`: the rendered
Dockerfile's FROM names that tag, which the builder finds locally. The canonical name stays in the
image's base labels, stack.json and the build record.
"""

from __future__ import annotations

from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.reference import parse_reference
from envbuild.render.bundleoci import docker_archive, local_name, read_index, read_manifest


class BaseLoadError(EnvbuildError):
    pass


def load_base(bundle_dir: str, base_image: str) -> str:
    """Load the base the lock pins from the bundle into the current engine (unless the engine already
    holds that config under the local tag), check it, and return its local tag."""
    digest = parse_reference(base_image).digest or ""
    if not any(entry.get("digest") == digest for entry in read_index(bundle_dir)):
        raise UsageError(
            f"--bundle {bundle_dir}: oci/index.json has no entry for the base image {base_image}",
            fix="make the bundle again with `envbuild vendor` from this envbuild.lock",
        )
    manifest = read_manifest(bundle_dir, digest)
    tag = local_name(base_image)
    engine = current_engine()
    try:
        if engine.image_id(tag) != manifest.config_digest:
            engine.load_image(docker_archive(bundle_dir, manifest, tag))
        loaded = engine.image_id(tag)
    except EngineError as exc:
        raise BaseLoadError(
            f"--bundle {bundle_dir}: {engine.title} could not load the base image {base_image}: "
            f"{exc.message}",
            fix=exc.fix or "check the engine (`docker info`) and the bundle's oci/ folder",
        ) from None
    if loaded != manifest.config_digest:
        raise BaseLoadError(
            f"--bundle {bundle_dir}: after loading, {tag} is image {loaded}, but the manifest {digest} names "
            f"config {manifest.config_digest}",
            fix="make the bundle again with `envbuild vendor`, and check that nothing else tags " + tag,
        )
    return tag
