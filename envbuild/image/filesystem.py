"""`envbuild audit IMAGE`: the GPU kernels of an image's shared objects, read without running anything.

Two sources, chosen by the reference:

- `REPO@sha256:<digest>` is read from its registry (envbuild.oci.registry.stream_layers): the
  manifest (an index gives its linux/amd64 image), then each layer blob as it streams. Nothing is
  pulled into a Docker Engine, and no Engine is needed.
- Anything else (a name, name:tag, an image id) is an image in the local Docker Engine, read through
  `docker save` as a stream (the Engine's archive of the image's layers). No container is created.
  What it finds is kept by the image's layer digests (envbuild.image.auditcache): an image whose
  layers were read before is judged from those facts, without exporting it again.

Either way only the ELF shared objects are written to a temporary directory, with the layers'
whiteouts applied (envbuild.image.layers), and envbuild.audit.tree judges them. A missing image is a
UsageError (exit 2) that says where else to look. `docker` and `requests` are imported inside the
functions: importing this module costs nothing.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import tarfile
import tempfile

from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.audit.kernels import Kernels, cuobjdump_binary
from envbuild.audit.libraries import check_framework
from envbuild.audit.tree import Audit, judge_tree, read_tree
from envbuild.errors import EnvbuildError, NotFound, UsageError
from envbuild.image import auditcache
from envbuild.image.layers import Layers
from envbuild.oci.reference import parse_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import IO

    from envbuild.matrix.model import Gpu

ENGINE_TIMEOUT_S = 300  # the longest one read of the `docker save` stream may wait
SAVE_CHUNK = 1 << 20


def from_registry(ref: str) -> bool:
    """Whether `ref` is read from its registry (pinned by digest) rather than from the local Engine."""
    return "@sha256:" in ref


def audit_image(
    ref: str, gpus: tuple[Gpu, ...], framework: str | None = None, *, docker_config: str | None = None
) -> Audit:
    """Audit the shared objects of the image `ref` for `gpus` (see the module docstring)."""
    check_framework(framework)
    if from_registry(ref):
        kernels = _read(lambda layers: _read_registry(ref, layers, docker_config))
    else:
        image = _engine_image(ref)
        digests = (image.attrs.get("RootFS") or {}).get("Layers") or []
        binary = cuobjdump_binary()
        kernels = auditcache.load(digests, binary)
        if kernels is None:
            kernels = _read(lambda layers: _read_engine(image, ref, layers))
            auditcache.store(digests, binary, kernels)
    return judge_tree(kernels, gpus, target=ref, framework=framework)


def _read(read_layers: Callable[[Layers], list[str]]) -> dict[str, Kernels]:
    """The kernels of the shared objects in the filesystem the layers make: `read_layers` reads each
    layer into `Layers` and gives their order; only those objects are written to a scratch root."""
    with tempfile.TemporaryDirectory(prefix="envbuild-audit-image-") as scratch:
        layers = Layers(os.path.join(scratch, "layers"))
        order = read_layers(layers)
        root = os.path.join(scratch, "root")
        os.makedirs(root)
        layers.extract(order, root)
        return read_tree(root)


def _read_registry(ref: str, layers: Layers, docker_config: str | None) -> list[str]:
    from envbuild.oci.registry import stream_layers

    parse_reference(ref)  # a malformed reference is a UsageError before any request
    order: list[str] = []
    try:
        for digest, media_type, reader in stream_layers(ref, docker_config=docker_config):
            if "zstd" in media_type:
                raise EnvbuildError(
                    f"layer {digest} of {ref} is zstd-compressed ({media_type}), which envbuild cannot read",
                    fix="push the image with gzip layers (the docker and buildx default)",
                )
            layers.read(digest, reader, ref)
            order.append(digest)
    except NotFound as exc:
        raise UsageError(
            exc.message,
            fix=f"{exc.fix}; an image only in the local Docker Engine is audited by its name or id",
        ) from None
    return order


def _engine_image(ref: str):  # -> docker.models.images.Image
    """The image `ref` in the local Docker Engine (its attrs: `docker image inspect`)."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise UsageError(
            f"image {ref!r} is not in this Docker Engine",
            fix="build or pull it first, or give REPO@sha256:<digest> to read it from its registry "
            "without pulling",
        ) from None
    except docker.errors.APIError as exc:
        text = redact(str(exc.explanation or exc))
        if exc.status_code == 400:
            raise UsageError(
                f"{ref!r} is not an image reference the Docker Engine accepts: {text}",
                fix="give an image name[:tag], an image id, or REPO@sha256:<digest>",
            ) from None
        raise EnvbuildError(
            f"the Docker Engine could not find {ref!r}: {text}",
            fix="check that dockerd is healthy (docker info)",
        ) from None
    except docker.errors.DockerException as exc:
        raise EnvbuildError(
            f"cannot reach the Docker Engine: {redact(str(exc))}",
            fix="start dockerd, or point DOCKER_HOST at a running engine; a pushed image can be "
            "audited as REPO@sha256:<digest> without one",
        ) from None


def _read_engine(image, ref: str, layers: Layers) -> list[str]:  # image: docker.models.images.Image
    """Read every layer of `image` from the Engine's `docker save` stream into `layers`; their order."""
    stream = io.BufferedReader(_ChunkReader(image.save(chunk_size=SAVE_CHUNK), ref), SAVE_CHUNK)
    manifest: list | None = None
    aliases: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[arg-type]
            for member in archive:
                if member.name == "manifest.json" and member.isfile():
                    handle = archive.extractfile(member)
                    manifest = json.loads(handle.read()) if handle else None
                elif member.issym():  # `docker save` links a layer it already wrote
                    aliases[member.name] = posixpath.normpath(
                        posixpath.join(posixpath.dirname(member.name), member.linkname)
                    )
                elif member.isfile() and _is_layer_name(member.name):
                    handle = archive.extractfile(member)
                    head = handle.read(1) if handle is not None else b""
                    if head and head != b"{":  # an OCI blob that is JSON (config, manifest) is no layer
                        layers.read(member.name, _Prefixed(head, handle), ref)  # type: ignore[arg-type]
    except (tarfile.TarError, EOFError, ValueError) as exc:
        raise EnvbuildError(
            f"the Docker Engine's archive of {ref!r} is not a readable tar archive ({exc})",
            fix="check that dockerd is healthy (docker info) and retry",
        ) from None
    names = _layer_names(manifest, ref)
    return [aliases.get(name, name) for name in names]


def _is_layer_name(name: str) -> bool:
    """A layer tarball in `docker save` output: `<id>/layer.tar` (docker <= 24), or a blob of the OCI
    layout docker >= 25 writes (the layers, and the JSON config and manifests, which are skipped)."""
    return name.endswith("/layer.tar") or name.startswith("blobs/sha256/")


def _layer_names(manifest: object, ref: str) -> list[str]:
    entry = manifest[0] if isinstance(manifest, list) and manifest else None
    names = entry.get("Layers") if isinstance(entry, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise EnvbuildError(
            f"the Docker Engine's archive of {ref!r} has no manifest.json with a layer list",
            fix="check that dockerd is healthy (docker info) and retry",
        )
    return [posixpath.normpath(n) for n in names]


class _ChunkReader(io.RawIOBase):
    """A raw reader over the chunks `Image.save()` yields (wrap it in io.BufferedReader); Engine
    errors become EnvbuildError."""

    def __init__(self, chunks: Iterator[bytes], ref: str) -> None:
        super().__init__()
        self.chunks = chunks
        self.ref = ref
        self.chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        import docker.errors
        import requests

        while not self.chunk:
            try:
                self.chunk = memoryview(next(self.chunks))
            except StopIteration:
                return 0
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise EnvbuildError(
                    f"the Docker Engine stopped sending {self.ref!r}: {redact(str(exc))}",
                    fix="check that dockerd is healthy (docker info) and retry",
                ) from None
        size = min(len(buffer), len(self.chunk))
        buffer[:size] = self.chunk[:size]
        self.chunk = self.chunk[size:]
        return size


class _Prefixed:
    """`head` (bytes already read to look at a blob) followed by the rest of `rest`."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head = head
        self.rest = rest

    def read(self, size: int = -1) -> bytes:
        if not self.head:
            return self.rest.read(size)
        if size is None or size < 0:
            data, self.head = self.head + self.rest.read(), b""
            return data
        data, self.head = self.head[:size], self.head[size:]
        return data if len(data) == size else data + self.rest.read(size - len(data))
