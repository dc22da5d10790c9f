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
import os
import posixpath
import re
import shutil
import tarfile
import tempfile

from envbuild._util import limits
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact
from envbuild.audit.kernels import Kernels, cuobjdump_binary, read_kernels
from envbuild.audit.libraries import check_framework
from envbuild.audit.tree import Audit, file_sizes, judge_tree, read_tree
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import EnvbuildError, NotFound, UsageError
from envbuild.image import auditcache, storage
from envbuild.image.layerfacts import LayerFacts, compose, read_layer, reads_needed, size_of
from envbuild.image.layers import Layers, Prefixed
from envbuild.oci.reference import parse_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from envbuild.audit.skip import AuditSkip
    from envbuild.matrix.model import Gpu

ENGINE_TIMEOUT_S = 300  # the longest one read of the `docker save` stream may wait
SAVE_CHUNK = 1 << 20


def from_registry(ref: str) -> bool:
    """Whether `ref` is read from its registry (pinned by digest) rather than from the local Engine."""
    return "@sha256:" in ref


class LayerRead(Record):
    """How an audit of a local image got its layers' facts: the build record's audit.layers."""

    __slots__ = ("total", "read", "cached", "source")
    total: int
    read: int  # layers whose shared objects cuobjdump read this time
    cached: int  # layers answered by envbuild.image.auditcache
    # "cache" (nothing read), "storage" (the Engine's overlay2 directories), "docker save", "registry"
    source: str

    def document(self) -> dict:
        return {"total": self.total, "read": self.read, "cached": self.cached, "source": self.source}


def audit_image(
    ref: str,
    gpus: tuple[Gpu, ...],
    framework: str | None = None,
    *,
    docker_config: str | None = None,
    say: Callable[[str], None] | None = None,
    skip: tuple[AuditSkip, ...] = (),
) -> Audit:
    """Audit the shared objects of the image `ref` for `gpus` (see the module docstring), not judging
    the libraries `skip` names (audit.skip)."""
    return audit_image_layers(ref, gpus, framework, docker_config=docker_config, say=say, skip=skip)[0]


def audit_image_layers(
    ref: str,
    gpus: tuple[Gpu, ...],
    framework: str | None = None,
    *,
    docker_config: str | None = None,
    say: Callable[[str], None] | None = None,
    skip: tuple[AuditSkip, ...] = (),
) -> tuple[Audit, LayerRead]:
    """audit_image, and how its layers were read; `say` gets a progress line per layer read."""
    check_framework(framework)
    if from_registry(ref):
        order: list[str] = []
        kernels = _read(lambda layers: order.extend(_read_registry(ref, layers, docker_config)) or order)
        read = LayerRead(total=len(order), read=len(order), cached=0, source="registry")
    else:
        kernels, read = _engine_kernels(_engine_image(ref), ref, say)
    return judge_tree(kernels, gpus, target=ref, framework=framework, skip=skip), read


def _engine_kernels(
    image, ref: str, say: Callable[[str], None] | None
) -> tuple[dict[str, Kernels], LayerRead]:  # image: docker.models.images.Image
    """The kernels of a local image's shared objects, composed from its layers' facts: those the cache
    has, and the others read from the Engine's storage when this process can, else `docker save`. A
    library's name linked to a file of another layer is judged by that file (layerfacts.compose), read
    from the storage, from the export this audit made, or (every layer cached, the storage not
    readable here) from a second export made for it alone."""
    diff_ids = list((image.attrs.get("RootFS") or {}).get("Layers") or [])
    binary = cuobjdump_binary()
    facts = {diff_id: auditcache.load_layer(diff_id, binary) for diff_id in dict.fromkeys(diff_ids)}
    missing = [diff_id for diff_id, found in facts.items() if found is None]
    positions_read = sum(1 for diff_id in diff_ids if diff_id in missing)

    def layer_read(source: str) -> LayerRead:
        return LayerRead(
            total=len(diff_ids), read=positions_read, cached=len(diff_ids) - positions_read, source=source
        )

    directories = storage.layer_directories(image.attrs, diff_ids, _data_root(image)) if missing else None
    if missing and directories is None:
        with _Saved(image, ref, diff_ids, say, f"to read {len(missing)} new layer(s)") as saved:
            facts.update(saved.facts(missing, binary, say))
            for diff_id in missing:
                auditcache.store_layer(diff_id, binary, facts[diff_id])  # type: ignore[arg-type]
            every = [facts[diff_id] for diff_id in diff_ids]
            return compose(every, saved.reader(binary)), layer_read("docker save")  # type: ignore[arg-type]
    if missing and directories is not None:
        where = dict(zip(diff_ids, directories, strict=True))
        for number, diff_id in enumerate(missing, 1):
            changes = storage.read_directory(where[diff_id])
            tell = _layer_say(say, number, len(missing), diff_id, changes)
            facts[diff_id] = _read_one(changes, binary, tell)
            auditcache.store_layer(diff_id, binary, facts[diff_id])  # type: ignore[arg-type]
    ordered: list[LayerFacts] = [facts[diff_id] for diff_id in diff_ids]  # type: ignore[misc]
    source = "storage" if missing else "cache"
    needed = reads_needed(ordered)
    if not needed:
        return compose(ordered), layer_read(source)
    if directories is None:  # every layer was cached: the storage was not looked at yet
        directories = storage.layer_directories(image.attrs, diff_ids, _data_root(image))
    if directories is not None:
        return compose(ordered, _storage_reader(directories, binary)), layer_read(source)
    targets = ", ".join(f"/{target}" for target, _ in needed[:3])
    with _Saved(image, ref, diff_ids, say, f"to read the file(s) a library links to ({targets})") as saved:
        return compose(ordered, saved.reader(binary)), layer_read("docker save")  # no layer read again


def _storage_reader(directories: list[str], binary: str) -> Callable[[str, int], Kernels | None]:
    """Reads a link's target from the overlay2 directory of the layer that holds it."""

    def read(target: str, index: int) -> Kernels | None:
        file = storage.read_target(directories[index], target)
        return _kernels_of(file, binary) if file is not None else None

    return read


def _kernels_of(file: str, binary: str) -> Kernels:
    return read_kernels(file, binary).replace(size=file_sizes([file])[0])


def _data_root(image) -> str | None:  # image: docker.models.images.Image
    """The Engine's DockerRootDir, or None when it does not say."""
    try:
        root = image.client.info().get("DockerRootDir")
    except Exception:
        return None
    return root if isinstance(root, str) and root.startswith("/") else None


def _layer_say(
    say: Callable[[str], None] | None, number: int, count: int, diff_id: str, changes
) -> Callable[[str], None] | None:
    """A progress line for the layer being read, and the sayer its library counts go to."""
    if say is None or not changes.added:
        return None
    megabytes = size_of(changes.added) / 1e6
    say(
        f"audit: layer {number}/{count} ({diff_id[7:19]}): {len(changes.added)} shared objects, "
        f"{megabytes:,.0f} MB to read"
    )
    return lambda line: say(f"audit: layer {number}/{count}: {line}")


def _read_one(changes, binary: str, say: Callable[[str], None] | None) -> LayerFacts:
    return read_layer(
        deleted=changes.deleted,
        opaque=changes.opaque,
        replaced=changes.replaced,
        added=changes.added,
        binary=binary,
        links=changes.links,
        say=say,
    )


class _Saved:
    """The Engine's `docker save` of the whole image (the only API that gives a layer's files), read
    into a scratch directory for as long as the `with` lasts: every layer streams, and every ELF file
    and link of each is kept, so any layer's file can be read."""

    def __init__(
        self, image, ref: str, diff_ids: list[str], say: Callable[[str], None] | None, why: str
    ) -> None:  # image: docker.models.images.Image
        self.image, self.ref, self.diff_ids, self.say, self.why = image, ref, diff_ids, say, why
        self.targets = 0

    def __enter__(self) -> _Saved:
        if self.say:
            self.say(f"audit: exporting {self.ref} from the Engine (docker save) {self.why}")
        self.temporary = tempfile.TemporaryDirectory(prefix="envbuild-audit-image-")
        self.scratch = self.temporary.name
        try:
            self.layers = Layers(os.path.join(self.scratch, "layers"))
            order = _read_engine(self.image, self.ref, self.layers)
            if len(order) != len(self.diff_ids):
                raise EnvbuildError(
                    f"the Docker Engine's archive of {self.ref!r} lists {len(order)} layers, its config "
                    f"{len(self.diff_ids)}",
                    fix="check that dockerd is healthy (docker info) and retry",
                )
            self.layers.survivors(order)  # every layer the list names is in the archive
            self.names = dict(zip(self.diff_ids, order, strict=True))
        except BaseException:
            self.temporary.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.temporary.cleanup()

    def facts(
        self, missing: list[str], binary: str, say: Callable[[str], None] | None
    ) -> dict[str, LayerFacts]:
        """The facts of the `missing` layers: only their shared objects go to cuobjdump."""
        found = {}
        for number, diff_id in enumerate(missing, 1):
            changes = self.layers.changes[self.names[diff_id]]
            changes.added = _named(changes.added, os.path.join(self.scratch, "named", str(number)))
            tell = _layer_say(say, number, len(missing), diff_id, changes)
            found[diff_id] = _read_one(changes, binary, tell)
        return found

    def reader(self, binary: str) -> Callable[[str, int], Kernels | None]:
        """Reads a link's target from the kept files of the layer (by index, bottom first) holding it."""

        def read(target: str, index: int) -> Kernels | None:
            changes = self.layers.changes[self.names[self.diff_ids[index]]]
            stored = changes.added.get(target) or changes.extra.get(target)
            if not isinstance(stored, str):  # no ELF file: a link, or a file the loader cannot load
                return None
            self.targets += 1
            where = os.path.join(self.scratch, "targets", str(self.targets))
            return _kernels_of(_named({target: stored}, where)[target], binary)

        return read


def _named(added: dict[str, str], directory: str) -> dict[str, str]:
    """The scratch files linked under their names in the image, one directory each: cuobjdump quotes
    the file it reads in its errors, and "Invalid ELF in '396'" names nothing a user can find."""
    named = {}
    for number, (path, stored) in enumerate(sorted(added.items())):
        destination = os.path.join(directory, str(number), posixpath.basename(path))
        os.makedirs(os.path.dirname(destination))
        try:
            os.link(stored, destination)
        except OSError:
            shutil.copyfile(stored, destination)
        named[path] = destination
    return named


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
    import docker.errors

    try:
        client = current_engine().client(timeout=ENGINE_TIMEOUT_S)
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
    except (EngineError, docker.errors.DockerException) as exc:
        why = exc.message if isinstance(exc, EngineError) else redact(str(exc))
        raise EnvbuildError(
            f"cannot reach the Docker Engine: {why}",
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
                    most = limits.DOCUMENT_BYTES.get()
                    if member.size > most:
                        raise EnvbuildError(
                            f"the Docker Engine's archive of {ref!r} has a manifest.json of "
                            f"{limits.size(member.size)} (at most {limits.size(most)})",
                            fix="check that dockerd is healthy (docker info) and retry",
                        )
                    manifest = parse_json(handle.read()) if handle else None
                elif member.issym():  # `docker save` links a layer it already wrote
                    aliases[member.name] = posixpath.normpath(
                        posixpath.join(posixpath.dirname(member.name), member.linkname)
                    )
                elif member.isfile() and is_layer_name(member.name):
                    handle = archive.extractfile(member)
                    head = handle.read(1) if handle is not None else b""
                    if head and head != b"{":  # an OCI blob that is JSON (config, manifest) is no layer
                        layers.read(member.name, Prefixed(head, handle), ref)  # type: ignore[arg-type]
    except (tarfile.TarError, EOFError, ValueError) as exc:
        raise EnvbuildError(
            f"the Docker Engine's archive of {ref!r} is not a readable tar archive ({exc})",
            fix="check that dockerd is healthy (docker info) and retry",
        ) from None
    names = _layer_names(manifest, ref)
    return [aliases.get(name, name) for name in names]


_ARCHIVE_LAYER = re.compile(r"^[0-9a-f]{64}\.tar$")


def is_layer_name(name: str) -> bool:
    """A layer tarball in `docker save` output: `<id>/layer.tar` (docker <= 24), a blob of the OCI
    layout docker >= 25 writes (the layers, and the JSON config and manifests, which are skipped), or
    `<digest>.tar`, as containers/image's docker-archive writes them (Podman's compat `images/get`:
    its `<id>/layer.tar` entries are links to those)."""
    return name.endswith("/layer.tar") or name.startswith("blobs/sha256/") or bool(_ARCHIVE_LAYER.match(name))


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
