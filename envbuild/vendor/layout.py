"""The base image, by the digest the lock pins, as an OCI image layout inside the bundle: oci-layout,
index.json (one entry per base image) and blobs/sha256/<hex> (manifests, configs, layers; a blob that
two images share is stored once).

Everything comes through the registry API (oci.registry.Repository: credentials, retries, the
digest-checked manifest and config readers); a layer is streamed to disk, bounded by the size its
manifest declares and hashed as it comes. A blob already in the bundle with its digest is not asked
for again, so a second run reads the manifest and config from the bundle and asks the registry for
nothing.
"""

from __future__ import annotations

import json
import os
import time

from envbuild._util import httpbody, limits
from envbuild._util.files import write_atomic
from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import EnvbuildError
from envbuild.oci.reference import parse_reference
from envbuild.vendor.manifest import BundleFile

if TYPE_CHECKING:
    from collections.abc import Iterator

    from envbuild.oci.registry import Repository
    from envbuild.vendor.download import Tally

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
PLATFORM_ANNOTATION = "io.envbuild.platform"
INDEX_TYPES = (OCI_INDEX, "application/vnd.docker.distribution.manifest.list.v2+json")


def blob_path(bundle_dir: str, digest: str) -> str:
    return os.path.join(bundle_dir, "oci", "blobs", "sha256", digest.removeprefix("sha256:"))


def blob_relative(digest: str) -> str:
    return f"oci/blobs/sha256/{digest.removeprefix('sha256:')}"


class _Image:
    """One image's blobs into the bundle."""

    def __init__(self, repository: Repository, bundle_dir: str, source: str, tally: Tally) -> None:
        self.repository = repository
        self.bundle_dir = bundle_dir
        self.source = source
        self.tally = tally
        self.files: list[BundleFile] = []

    def _record(self, digest: str, size: int) -> None:
        self.files.append(
            BundleFile(
                path=blob_relative(digest),
                kind="blob",
                sha256=digest.removeprefix("sha256:"),
                size=size,
                source=self.source,
            )
        )

    def small(self, digest: str, *, manifest: bool) -> bytes:
        """A manifest or config blob: from the bundle when it is there intact, else from the registry
        (checked against its digest there), then stored."""
        from envbuild.vendor.download import intact, store

        path = blob_path(self.bundle_dir, digest)
        hexdigest = digest.removeprefix("sha256:")
        if intact(path, hexdigest):
            with open(path, "rb") as handle:
                body = handle.read(limits.DOCUMENT_BYTES.get() + 1)
        else:
            body = self.repository.manifest(digest)[0] if manifest else self.repository.blob(digest)
        size = store(
            path,
            hexdigest,
            lambda: iter((body,)),
            label=f"image blob {digest[:19]}",
            source=self.source,
            tally=self.tally,
        )
        self._record(digest, size)
        return body

    def layer(self, digest: str, declared: int | None) -> None:
        from envbuild.vendor.download import store

        def pieces() -> Iterator[bytes]:
            started = time.monotonic()
            response = self.repository.send("GET", f"blobs/{digest}", headers={"Accept-Encoding": "identity"})
            if response.status_code != 200:
                response.close()
                raise EnvbuildError(
                    f"{self.repository.where}: the registry answered HTTP {response.status_code} for "
                    f"layer {digest}",
                    fix="check that the image was pushed completely (and the spec's [mirrors]); run "
                    "`envbuild vendor` again",
                )
            cap = declared if declared is not None else limits.LAYER_BYTES.get()
            yield from httpbody.chunks(
                response,
                what=f"layer {digest} of {self.repository.where}",
                limit=min(cap, limits.LAYER_BYTES.get()),
                started=started,
                decode=False,
                seconds=limits.HTTP_DEADLINE_S.get() + cap / limits.LAYER_RATE.get(),
            )

        size = store(
            blob_path(self.bundle_dir, digest),
            digest.removeprefix("sha256:"),
            pieces,
            label=f"image layer {digest[:19]}",
            source=self.source,
            tally=self.tally,
        )
        self._record(digest, size)


def vendor_image(
    base_image: str, pulled: str, image_platform: str, bundle_dir: str, tally: Tally
) -> tuple[dict, list[BundleFile]]:
    """`base_image` (the lock's name:tag@sha256:..., canonical), pulled as `pulled` (through the
    mirrors), into the bundle's OCI layout: (its index.json descriptor, the blobs written)."""
    from envbuild.oci.registry import (
        Repository,
        config_descriptor,
        json_object,
        manifest_layers,
        platform_entries,
    )

    digest = parse_reference(base_image).digest
    if not digest:
        raise EnvbuildError(
            f"base image {base_image} is not pinned by digest", fix="run `envbuild lock` again to pin it"
        )
    repository = Repository(pulled)
    image = _Image(repository, bundle_dir, base_image, tally)
    body = image.small(digest, manifest=True)
    top = json_object(body, f"the manifest {digest} of {repository.where}")
    media_type = top.text("mediaType") or "application/vnd.oci.image.manifest.v1+json"
    descriptor = {"mediaType": media_type, "digest": digest, "size": len(body)}
    manifest, manifest_digest = top, digest
    if media_type in INDEX_TYPES or ("manifests" in top.raw and "config" not in top.raw):
        wanted = image_platform.split("/")[:2]
        entry = next((e for name, e in platform_entries(top) if name.split("/")[:2] == wanted), None)
        if entry is None:
            raise EnvbuildError(
                f"{base_image}: its index has no {image_platform} image",
                fix="lock the target again (`envbuild lock`): a lock pins each platform's own manifest",
            )
        manifest_digest = entry.digest()
        manifest = json_object(image.small(manifest_digest, manifest=True), f"the manifest {manifest_digest}")
    what = f"the manifest {manifest_digest} of {repository.where}"
    kind = manifest.text("mediaType")
    config = config_descriptor(manifest, what, kind)
    image.small(config, manifest=False)
    for layer in manifest_layers(manifest, what, kind):
        image.layer(layer.digest(), layer.size())
    descriptor["annotations"] = {REF_NAME: base_image, PLATFORM_ANNOTATION: image_platform}
    return descriptor, image.files


def write_layout(bundle_dir: str, descriptors: list[dict]) -> None:
    """oci/oci-layout and oci/index.json listing `descriptors` (each image once)."""
    oci = os.path.join(bundle_dir, "oci")
    write_atomic(os.path.join(oci, "oci-layout"), json.dumps({"imageLayoutVersion": "1.0.0"}) + "\n")
    seen: dict[tuple[str, str], dict] = {}
    for descriptor in descriptors:
        key = (descriptor["digest"], descriptor["annotations"][REF_NAME])
        seen.setdefault(key, descriptor)
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": list(seen.values())}
    write_atomic(os.path.join(oci, "index.json"), json.dumps(index, indent=2) + "\n")
