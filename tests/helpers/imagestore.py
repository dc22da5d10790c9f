"""A registry-shaped HTTP server on loopback holding images made in the test from tar layers: what
the readers of a pushed image (image.registry_inventory) are tested against without a registry
process. Real HTTP, real tar and gzip bytes; only the set of images is the test's."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

from tests.helpers.registry import LoopbackServer, RegistryHandler

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def tar_layer(entries: dict[str, bytes | None]) -> bytes:
    """A gzip tar layer: path -> file bytes, or None for a directory; whiteouts are plain empty files
    named `.wh.NAME` / `.wh..wh..opq`, as the OCI layer format has them."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, data in entries.items():
            info = tarfile.TarInfo(path)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue())


class ImageStore(LoopbackServer):
    """One repository ("team/img") whose manifests and blobs the test adds; GET and HEAD as a registry
    answers them, 404 with MANIFEST_UNKNOWN / BLOB_UNKNOWN otherwise."""

    repository = "team/img"

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        store = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                kind, _, digest = self.path.removeprefix(f"/v2/{store.repository}/").partition("/")
                if kind == "manifests" and digest in store.manifests:
                    body, media_type = store.manifests[digest]
                    self.reply(200, body, digest=digest, media_type=media_type)
                elif kind == "blobs" and digest in store.blobs:
                    self.reply(200, store.blobs[digest], media_type="application/octet-stream")
                else:
                    self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "unknown"}]}')

            do_HEAD = do_GET

        super().__init__(Handler)

    def ref(self, digest: str) -> str:
        return f"{self.host}/{self.repository}@{digest}"

    def add_blob(self, body: bytes) -> str:
        self.blobs[digest_of(body)] = body
        return digest_of(body)

    def add_manifest(self, body: bytes, media_type: str) -> str:
        self.manifests[digest_of(body)] = (body, media_type)
        return digest_of(body)

    def add_image(self, layers: list[bytes], config: dict) -> tuple[str, str]:
        """(manifest digest, config digest) of an OCI image of `layers` (bottom first)."""
        config_digest = self.add_blob(json.dumps(config).encode())
        body = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": OCI_CONFIG,
                    "digest": config_digest,
                    "size": len(self.blobs[config_digest]),
                },
                "layers": [
                    {"mediaType": GZIP_LAYER, "digest": self.add_blob(layer), "size": len(layer)}
                    for layer in layers
                ],
            }
        ).encode()
        return self.add_manifest(body, OCI_MANIFEST), config_digest

    def add_index(self, images: dict[str, str]) -> str:
        """An OCI index over {"os/arch": manifest digest}, with a BuildKit attestation manifest
        (platform unknown/unknown, its own manifest) listed first, so a reader that takes an index's
        first entry reads the attestation, not an image."""
        attestation, _ = self.add_image([tar_layer({"sbom.spdx.json": b"{}"})], {"os": "unknown"})
        entries = [
            {
                "mediaType": OCI_MANIFEST,
                "digest": attestation,
                "size": len(self.manifests[attestation][0]),
                "platform": {"os": "unknown", "architecture": "unknown"},
                "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
            }
        ]
        for platform, digest in images.items():
            os_name, architecture = platform.split("/")[:2]
            body, _ = self.manifests[digest]
            entries.append(
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": len(body),
                    "platform": {"os": os_name, "architecture": architecture},
                }
            )
        return self.add_manifest(
            json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode(), OCI_INDEX
        )
