"""The base image in a bundle's OCI layout (oci/index.json, oci/blobs/sha256/), read for loading into
the engine: the manifest the lock pins, found by digest and checked, and the docker-archive tar that
`docker load` (POST /images/load) takes, written as a stream straight from the blob files.

A docker archive is a tar with manifest.json ([{"Config": path, "RepoTags": [...], "Layers": [paths]}])
and the files it names. The Engine decompresses gzip layers itself and checks each layer's diff ID
against the config, so the blobs go in as they are, with no copy on disk: a CUDA base is gigabytes.
Every blob's sha256 is checked again as it streams (the bundle may change under us); a mismatch ends
the stream, and the load with it, before the Engine can tag anything.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile

from envbuild._util import limits
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.oci.reference import parse_reference

if TYPE_CHECKING:
    from collections.abc import Iterator

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
# what `docker load` unpacks: tar, gzip-compressed tar (DecompressStream detects which)
LAYER_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
)
FIX = "make the bundle again with `envbuild vendor` on the connected machine, and copy it across whole"
CHUNK = 1 << 20
LOCAL_REPOSITORY = "envbuild-bundle"


def local_name(base_image: str) -> str:
    """The bundle-local tag of the lock's base `base_image` (name:tag@sha256:...)."""
    ref = parse_reference(base_image)
    if not ref.digest:
        raise UsageError(f"the base image {base_image} is not pinned by digest", fix="run `envbuild lock`")
    return f"{LOCAL_REPOSITORY}/{ref.repository}:{ref.digest.removeprefix('sha256:')[:12]}"


class BaseManifest(Record):
    """The base's manifest in the bundle: its digest, the config digest (the image ID the Engine must
    report after loading), and the bundle-relative paths of the manifest, config and layers."""

    __slots__ = ("digest", "config_digest", "path", "config_path", "layer_paths")
    digest: str
    config_digest: str
    path: str
    config_path: str
    layer_paths: tuple[str, ...]


def open_member(bundle_dir: str, relative: str):
    """Open bundle_dir/relative for reading, refusing a symbolic link anywhere on the way (a link
    could point outside the bundle) and anything but a regular file. OSError when it cannot."""
    current = bundle_dir
    for part in relative.split("/"):
        current = os.path.join(current, part)
        if stat.S_ISLNK(os.lstat(current).st_mode):
            raise OSError(f"{relative} is a symbolic link")
    handle = open(current, "rb")  # noqa: SIM115 - the caller closes it
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise OSError(f"{relative} is not a regular file")
    return handle


def _blob(digest: object, what: str) -> str:
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        raise UsageError(f"--bundle: {what} has no sha256 digest", fix=FIX)
    hexed = digest[len("sha256:") :]
    if len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
        raise UsageError(f"--bundle: {what}: {digest[:80]!r} is not sha256:<64 hex>", fix=FIX)
    return f"oci/blobs/sha256/{hexed}"


def _read_json(bundle_dir: str, relative: str, bound: int, digest: str | None = None) -> dict:
    try:
        with open_member(bundle_dir, relative) as handle:
            data = handle.read(bound + 1)
    except FileNotFoundError:
        raise UsageError(f"--bundle {bundle_dir}: {relative} is missing", fix=FIX) from None
    except OSError as exc:
        raise UsageError(
            f"--bundle {bundle_dir}: {relative} cannot be read ({exc.strerror or exc})", fix=FIX
        ) from None
    if len(data) > bound:
        raise UsageError(f"--bundle {bundle_dir}: {relative} is larger than {limits.size(bound)}", fix=FIX)
    if digest is not None and "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise UsageError(
            f"--bundle {bundle_dir}: {relative} does not hash to {digest}: altered or corrupted", fix=FIX
        )
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"--bundle {bundle_dir}: {relative} is not JSON ({exc})", fix=FIX) from None
    if not isinstance(document, dict):
        raise UsageError(f"--bundle {bundle_dir}: {relative} is not a JSON object", fix=FIX)
    return document


def read_index(bundle_dir: str) -> list[dict]:
    """oci/index.json's manifest descriptors."""
    index = _read_json(bundle_dir, "oci/index.json", limits.MANIFEST_BYTES.get())
    manifests = index.get("manifests")
    if not isinstance(manifests, list) or not all(isinstance(m, dict) for m in manifests):
        raise UsageError(f"--bundle {bundle_dir}: oci/index.json has no list of manifests", fix=FIX)
    return manifests


def read_manifest(bundle_dir: str, digest: str) -> BaseManifest:
    """The image manifest `digest` (checked against its bytes), with its config and layer paths."""
    path = _blob(digest, "the base image's manifest")
    manifest = _read_json(bundle_dir, path, limits.MANIFEST_BYTES.get(), digest)
    media_type = manifest.get("mediaType")
    if media_type is not None and media_type not in MANIFEST_TYPES:
        raise UsageError(
            f"--bundle {bundle_dir}: {path} is a {str(media_type)[:80]}, not an image manifest "
            "(the lock pins the platform's own manifest)",
            fix=FIX,
        )
    config = manifest.get("config")
    layers = manifest.get("layers")
    if (
        not isinstance(config, dict)
        or not isinstance(layers, list)
        or not all(isinstance(x, dict) for x in layers)
    ):
        raise UsageError(f"--bundle {bundle_dir}: {path} names no config or no layers", fix=FIX)
    for layer in layers:
        if layer.get("mediaType") not in LAYER_TYPES:
            raise UsageError(
                f"--bundle {bundle_dir}: {path}: layer {str(layer.get('digest'))[:80]} is "
                f"{str(layer.get('mediaType'))[:80]}, which `docker load` does not take "
                f"(accepted: {', '.join(LAYER_TYPES)})",
                fix="vendor a base image whose layers are gzip or plain tar",
            )
    return BaseManifest(
        digest=digest,
        config_digest=str(config.get("digest")),
        path=path,
        config_path=_blob(config.get("digest"), f"{path}'s config"),
        layer_paths=tuple(_blob(layer.get("digest"), f"{path}'s layer") for layer in layers),
    )


def archive_manifest(manifest: BaseManifest, tag: str) -> bytes:
    """The docker-archive manifest.json that loads `manifest` tagged `tag`."""
    entry = {"Config": manifest.config_path, "RepoTags": [tag], "Layers": list(manifest.layer_paths)}
    return json.dumps([entry], indent=2).encode()


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def docker_archive(bundle_dir: str, manifest: BaseManifest, tag: str) -> Iterator[bytes]:
    """The docker-archive tar of the base, chunk by chunk: manifest.json, then the config and each
    layer once, each blob's sha256 checked as it is read (UsageError at the end of a blob that does
    not hash to its name, which ends the upload before the Engine loads it)."""
    head = archive_manifest(manifest, tag)
    yield _header("manifest.json", len(head)) + head + _padding(len(head))
    sent: set[str] = set()
    for path in (manifest.config_path, *manifest.layer_paths):
        if path in sent:
            continue
        sent.add(path)
        try:
            handle = open_member(bundle_dir, path)
        except OSError as exc:
            raise UsageError(
                f"--bundle {bundle_dir}: {path} cannot be read ({exc.strerror or exc})", fix=FIX
            ) from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            yield _header(path, size)
            digest, left = hashlib.sha256(), size
            while left > 0:
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    raise UsageError(f"--bundle {bundle_dir}: {path} shrank while it was read", fix=FIX)
                digest.update(chunk)
                left -= len(chunk)
                yield chunk
            if digest.hexdigest() != path.rsplit("/", 1)[1]:
                raise UsageError(
                    f"--bundle {bundle_dir}: {path} has sha256 {digest.hexdigest()}: altered or corrupted",
                    fix=FIX,
                )
            yield _padding(size)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def archive_names(chunks: Iterator[bytes]) -> list[str]:
    """The member names of a docker-archive stream (for tests and messages)."""
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:") as archive:
        return archive.getnames()


def bundle_from(plan, local: str):
    """The plan the Dockerfile is rendered from: FROM (and a devel runtime stage of the same base)
    names the bundle-local tag; labels, stack.json and records keep the canonical name."""
    runtime = local if plan.runtime_image == plan.base_image else plan.runtime_image
    return plan.replace(base_image=local, runtime_image=runtime)
