"""`envbuild audit REPO@sha256:...` against a registry-shaped server on loopback: the linux/amd64 image
of an index, layers streamed and checked against their digests, zstd refused, a missing digest exit 2.

The layers carry a real ELF shared object without device code (Python's own _ctypes extension), so
cuobjdump really reads it: it is listed as such, never an error."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import EnvbuildError
from envbuild.image.filesystem import audit_image
from tests.helpers.registry import LoopbackServer, RegistryHandler

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
REAL_ELF = Path(str(importlib.util.find_spec("_ctypes").origin)).read_bytes()  # type: ignore[union-attr]


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def gz_layer(path: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(path)
        info.size = len(REAL_ELF)
        archive.addfile(info, io.BytesIO(REAL_ELF))
    return gzip.compress(buffer.getvalue())


class ImageRegistry(LoopbackServer):
    """One repository holding an index of an arm64 and an amd64 image, and a zstd image; `tamper`
    serves every layer blob with a flipped byte."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.tamper = False
        config = self.add_blob(b'{"config": {}}')

        def image(layer: bytes, media_type: str = GZIP_LAYER) -> dict:
            body = json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config},
                    "layers": [{"mediaType": media_type, "digest": self.add_blob(layer), "size": len(layer)}],
                }
            ).encode()
            digest = self.add_manifest(body, OCI_MANIFEST)
            return {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body)}

        arm = image(gz_layer("usr/lib/libarm64only.so"))
        amd = image(gz_layer("usr/lib/python3/_ctypes.so"))
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {**arm, "platform": {"os": "linux", "architecture": "arm64"}},
                {**amd, "platform": {"os": "linux", "architecture": "amd64"}},
            ],
        }
        self.index = self.add_manifest(json.dumps(index).encode(), OCI_INDEX)
        self.zstd = image(b"(\xb5/\xfd not really zstd", ZSTD_LAYER)["digest"]
        registry = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                kind, _, digest = self.path.removeprefix("/v2/team/img/").partition("/")
                if kind == "manifests" and digest in registry.manifests:
                    body, media_type = registry.manifests[digest]
                    self.reply(200, body, digest=digest, media_type=media_type)
                elif kind == "blobs" and digest in registry.blobs:
                    body = registry.blobs[digest]
                    if registry.tamper and digest != config:
                        body = body[:-1] + bytes([body[-1] ^ 1])
                    self.reply(200, body, media_type="application/octet-stream")
                elif kind == "tags":
                    self.reply(200, b'{"name": "team/img", "tags": []}')
                else:
                    self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "unknown"}]}')

        super().__init__(Handler)

    def add_blob(self, body: bytes) -> str:
        self.blobs[digest_of(body)] = body
        return digest_of(body)

    def add_manifest(self, body: bytes, media_type: str) -> str:
        self.manifests[digest_of(body)] = (body, media_type)
        return digest_of(body)


@pytest.fixture
def registry() -> Iterator[ImageRegistry]:
    with ImageRegistry() as server:
        yield server  # type: ignore[misc]


def test_an_index_gives_its_linux_amd64_image_and_a_cpu_library_is_listed_not_an_error(
    registry: ImageRegistry,
) -> None:
    audit = audit_image(f"{registry.host}/team/img@{registry.index}", ())
    assert audit.libraries == () and audit.without_device_code == ("usr/lib/python3/_ctypes.so",)


def test_a_layer_that_does_not_match_its_digest_is_refused(registry: ImageRegistry) -> None:
    registry.tamper = True
    with pytest.raises(
        EnvbuildError, match=r"layer sha256:[0-9a-f]{64} of .*team/img does not match its digest"
    ):
        audit_image(f"{registry.host}/team/img@{registry.index}", ())


def test_a_zstd_layer_is_refused_with_a_fix(registry: ImageRegistry) -> None:
    with pytest.raises(EnvbuildError, match="is zstd-compressed") as raised:
        audit_image(f"{registry.host}/team/img@{registry.zstd}", ())
    assert raised.value.fix == "push the image with gzip layers (the docker and buildx default)"


def test_a_digest_the_registry_does_not_have_is_a_usage_error(
    registry: ImageRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"{registry.host}/team/img@sha256:{'1' * 64}"
    assert main(["audit", missing, "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert f"error: manifest sha256:{'1' * 64} not found in {registry.host}/team/img" in err
    assert "fix: check the digest" in err
