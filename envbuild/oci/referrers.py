"""Documents attached to an image digest in its registry (OCI 1.1 referrers), fetched back, and copied
along when an image is promoted into another repository.

A document is an OCI *artifact*: an image manifest whose `artifactType` says what it is, whose config
is the empty descriptor (application/vnd.oci.empty.v1+json, "{}"), whose one layer is the document,
and whose `subject` is the image's manifest descriptor. It is put by its own digest, never by a tag,
so it neither shows in `docker pull` nor moves when tags move.

Two ways to find them again, as the distribution spec says ("Listing Referrers", "Referrers Tag
Schema"):
- referrers-api: a registry that answers a manifest PUT with the `OCI-Subject` header indexes the
  subject itself, and GET /v2/<repo>/referrers/<digest> lists what refers to it;
- referrers-tag: otherwise (docker-registry/distribution 2.8 predates the API) the client keeps an
  OCI image index under the tag "sha256-<hex of the subject digest>", one descriptor per artifact.
`referrers` asks the API first and reads the tag when the API answers 404.

The tag index is read, extended and put back: two writers at the same moment can lose one entry (the
API has no conditional PUT on 2.8); attaching again repairs it, since an attach is idempotent.
`requests` comes in through oci.registry, inside its functions: importing this costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import time

from envbuild._util import limits
from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError, NotFound, UsageError
from envbuild.oci.reference import DIGEST_RE, parse_reference
from envbuild.oci.registry import INDEX_MEDIA_TYPES, Repository, index_entries, promote_by_digest, read_body
from envbuild.oci.shape import Shape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_DATA = b"{}"
EMPTY_DESCRIPTOR = {
    "mediaType": EMPTY_MEDIA_TYPE,
    "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
    "size": 2,
}
CREATED = "org.opencontainers.image.created"

PATH_API = "referrers-api"  # the registry indexes the subject (OCI-Subject header, /referrers/ endpoint)
PATH_TAG = "referrers-tag"  # envbuild keeps the "sha256-<hex>" tag index (the Referrers Tag Schema)


class Attached(Record):
    """One document attached: subject "registry/repo@sha256:...", the artifact manifest's digest, and
    the path the registry took (PATH_API or PATH_TAG)."""

    __slots__ = ("subject", "digest", "path")
    subject: str
    digest: str
    path: str


class Referrers(Record):
    """What refers to a digest: the descriptors (dicts: mediaType, digest, size, artifactType,
    annotations) and the path they were read from."""

    __slots__ = ("descriptors", "path")
    descriptors: tuple[dict, ...]
    path: str


class Artifact(Record):
    """One attached document, read back and checked: its manifest (and that manifest's digest), the
    digest it is attached to, its layer's media type and the layer's bytes."""

    __slots__ = ("manifest", "manifest_digest", "subject_digest", "media_type", "payload")
    manifest: dict
    manifest_digest: str
    subject_digest: str
    media_type: str
    payload: bytes


def referrers_tag(digest: str) -> str:
    """The Referrers Tag Schema's tag for `digest`: "sha256:<hex>" -> "sha256-<hex>"."""
    return digest.replace(":", "-", 1)


def attach(
    subject: str,
    *,
    artifact_type: str,
    payload: bytes,
    media_type: str,
    annotations: dict[str, str],
    docker_config: str | None = None,
) -> Attached:
    """Attach `payload` (a layer of `media_type`) to `subject` ("registry/repo@sha256:...", an image
    manifest or an index) as an artifact of `artifact_type` with `annotations`.

    org.opencontainers.image.created is added (now, UTC) unless `annotations` has it. Attaching the same
    payload with the same artifact type and annotations again (created aside) changes nothing and
    answers the artifact already there, so a retried push never duplicates a document."""
    repository, digest = _subject(subject, docker_config=docker_config)
    subject_body, subject_type, _ = repository.manifest(digest)  # checked against the digest
    payload_digest = "sha256:" + hashlib.sha256(payload).hexdigest()
    wanted = {k: v for k, v in annotations.items() if k != CREATED}
    for existing in _listed(repository, digest, artifact_type):
        found = _same_document(repository, existing, payload_digest, wanted)
        if found:
            return Attached(subject=f"{repository.name}@{digest}", digest=found, path=existing[1])

    repository.push_blob(EMPTY_DATA)
    repository.push_blob(payload)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": dict(EMPTY_DESCRIPTOR),
        "layers": [{"mediaType": media_type, "digest": payload_digest, "size": len(payload)}],
        "subject": {"mediaType": subject_type, "digest": digest, "size": len(subject_body)},
        "annotations": {CREATED: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **annotations},
    }
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    path = _put_artifact(repository, body, digest)
    return Attached(subject=f"{repository.name}@{digest}", digest=_digest(body), path=path)


def referrers(
    subject: str, *, artifact_type: str | None = None, docker_config: str | None = None
) -> Referrers:
    """What refers to `subject` ("registry/repo@sha256:..."), only `artifact_type` when given.

    GET /v2/<repo>/referrers/<digest> first; its 404 means the registry has no referrers API, and the
    "sha256-<hex>" tag index is read instead (no such tag: nothing refers to it). The filter is applied
    here too: a registry may ignore ?artifactType=."""
    repository, digest = _subject(subject, docker_config=docker_config)
    found = _listed(repository, digest, artifact_type)
    path = found[0][1] if found else _path_of(repository, digest)
    return Referrers(descriptors=tuple(d for d, _ in found), path=path)


def fetch_artifact(repository_ref: str, descriptor: dict, docker_config: str | None = None) -> Artifact:
    """The artifact `descriptor` (an entry of `referrers`) names in `repository_ref` ("registry/repo"),
    checked: the manifest against the descriptor's digest and size, its artifactType against the
    descriptor's, its layer's bytes against the layer's digest and size. Anything else is refused."""
    repository = Repository(repository_ref, docker_config=docker_config)
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise UsageError(
            f"a referrer descriptor needs a digest of the form sha256:<64 hex>, not {redact(str(digest))!r}",
            fix="pass a descriptor as envbuild.oci.referrers.referrers lists it",
        )
    body, _, _ = repository.manifest(digest)  # the bytes are checked against the digest there

    def corrupt(why: str) -> EnvbuildError:
        return EnvbuildError(
            f"artifact {digest} in {repository.where} is not what its referrers entry says: {why}",
            fix="the referrers index or the artifact was altered: attach the document again from the "
            "build's files (envbuild attest), and check the registry's storage",
        )

    entry = Shape(descriptor, f"the referrers entry {digest} of {repository.where}")
    size = entry.size()
    if size is not None and size != len(body):
        raise corrupt(f"the entry gives size {size}, the manifest has {len(body)} bytes")
    try:
        manifest = Shape.parse(body, f"the artifact manifest {digest} of {repository.where}")
    except EnvbuildError:
        raise corrupt("it is not an OCI image manifest") from None
    if manifest.raw.get("mediaType") != OCI_MANIFEST:
        raise corrupt("it is not an OCI image manifest")
    config = manifest.obj("config")
    kind = manifest.text("artifactType") or (config.text("mediaType") if config is not None else "")
    wanted = entry.text("artifactType")
    if wanted and kind != wanted:
        raise corrupt(f"its artifactType is {kind!r}, the entry says {wanted!r}")
    subject = manifest.obj("subject")
    if subject is None or not subject.has("digest"):
        raise corrupt("it has no subject")
    subject_digest = subject.digest()
    if not isinstance(manifest.raw.get("layers"), list) or len(manifest.raw["layers"]) != 1:
        manifest.objects("layers")  # a field of the wrong type is named as such
        raise corrupt("it does not have exactly one layer")
    layer = manifest.objects("layers")[0]
    layer_digest = layer.digest()
    layer_size = layer.size()
    media_type = layer.text("mediaType")
    manifest.mapping("annotations")
    payload = repository.blob(layer_digest)  # checked against the layer's digest there
    if layer_size != len(payload):
        raise corrupt(f"its layer gives size {layer_size}, the blob has {len(payload)} bytes")
    return Artifact(
        manifest=manifest.raw,
        manifest_digest=digest,
        subject_digest=subject_digest,
        media_type=media_type,
        payload=payload,
    )


def copy_referrers(
    subject: str, target_repository: str, *, docker_config: str | None = None
) -> list[Attached]:
    """Copy what refers to `subject` ("registry/repo@sha256:...") into `target_repository` of the same
    registry, where the subject was promoted: blobs mounted, artifact manifests put by digest, and the
    target's referrers tag kept when the registry has no referrers API. For an index, what refers to
    each of its manifests too. Already there: nothing is written twice."""
    source, digest = _subject(subject, docker_config=docker_config)
    target = Repository(target_repository, docker_config=docker_config)
    if target.where == source.where:
        return []
    digests = [digest]
    body, media_type, _ = source.manifest(digest)
    if media_type in INDEX_MEDIA_TYPES:
        index = Shape.parse(body, f"the image index {digest} of {source.where}")
        digests += [entry.digest() for entry in index_entries(index)]
    copied = []
    for subject_digest in digests:
        for descriptor, _ in _listed(source, subject_digest, None):
            artifact, _, artifact_digest = source.manifest(descriptor["digest"])
            manifest = Shape.parse(artifact, f"the artifact manifest {artifact_digest} of {source.where}")
            config = manifest.obj("config")
            for blob in [*([config] if config is not None else []), *manifest.objects("layers")]:
                target.mount_blob(source, blob.digest())
            path = _put_artifact(target, artifact, subject_digest, descriptor=descriptor)
            copied.append(
                Attached(subject=f"{target.name}@{subject_digest}", digest=artifact_digest, path=path)
            )
    return copied


def promote_with_referrers(
    ref: str,
    to: list[str],
    *,
    docker_config: str | None = None,
    vouch: Callable[[str], object] | None = None,
) -> list[tuple[str, str]]:
    """oci.registry.promote_by_digest, keeping the image's attached documents with it.

    Inside the source repository nothing more is needed: the documents refer to the digest, which the
    new tag names too. In another repository of the registry they are copied there (copy_referrers)
    once the image is, so `envbuild attest TARGET:TAG` finds them."""
    promoted = promote_by_digest(ref, to, docker_config=docker_config, vouch=vouch)
    source = parse_reference(ref)
    done = {(source.api_host, source.repository)}
    for full, _ in promoted:
        target = parse_reference(full)
        if (target.api_host, target.repository) not in done:
            done.add((target.api_host, target.repository))
            copy_referrers(ref, target.name, docker_config=docker_config)
    return promoted


# --- the pieces --------------------------------------------------------------------------------------


def _subject(subject: str, *, docker_config: str | None = None) -> tuple[Repository, str]:
    parsed = parse_reference(subject)
    if not parsed.digest:
        raise UsageError(
            f"documents are attached to a digest, not to {subject.strip()!r}",
            fix=f"pass {parsed.name}@sha256:<digest>, the digest the push reported",
        )
    return Repository(parsed.name, docker_config=docker_config), parsed.digest


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _listed(repository: Repository, digest: str, artifact_type: str | None) -> list[tuple[dict, str]]:
    """[(descriptor, path), ...] of what refers to `digest` in `repository`, of `artifact_type`."""
    params = {"artifactType": artifact_type} if artifact_type else None
    response = repository.send("GET", f"referrers/{digest}", params=params, headers={"Accept": OCI_INDEX})
    if response.status_code == 200:
        what = f"the referrers of {repository.where}@{digest}"
        index, path = _index(read_body(response, what, limits.MANIFEST_BYTES), what), PATH_API
    elif response.status_code == 404:  # no referrers API: the tag schema
        response.close()
        path = PATH_TAG
        try:
            body, _, _ = repository.manifest(referrers_tag(digest))
        except NotFound:
            return []
        index = _index(body, f"the referrers tag {repository.where}:{referrers_tag(digest)}")
    else:
        response.close()
        raise EnvbuildError(
            f"registry {repository.parsed.registry} answered HTTP {response.status_code} for the referrers "
            f"of {repository.where}@{digest}",
            fix="retry later; if it persists, check the registry's status",
        )
    found = []
    for entry in _descriptors(index):
        if artifact_type is None or entry.raw.get("artifactType") == artifact_type:
            found.append((entry.raw, path))
    return found


def _descriptors(index: Shape) -> list[Shape]:
    """The entries of a referrers list or tag index, each checked: a sha256 digest, and when given a
    whole-number size, a string artifactType and media type, and annotations of strings."""
    entries = index_entries(index)
    for entry in entries:
        entry.text("artifactType")
        entry.text("mediaType")
        entry.mapping("annotations")
    return entries


def _path_of(repository: Repository, digest: str) -> str:
    response = repository.send("GET", f"referrers/{digest}", headers={"Accept": OCI_INDEX})
    response.close()
    return PATH_API if response.status_code == 200 else PATH_TAG


def _index(body: bytes, what: str) -> Shape:
    """The OCI image index a referrers answer or tag holds, its entries checked (_descriptors)."""
    try:
        index = Shape.parse(body, what)
    except EnvbuildError:
        index = None
    if index is None or not isinstance(index.raw.get("manifests", []), list):
        raise EnvbuildError(
            f"{what} is not an OCI image index"
            + (" ('manifests' is not a list)" if index is not None else ""),
            fix="the referrers tag was overwritten by something else; delete the tag and attach the "
            "documents again",
        )
    _descriptors(index)
    return index


def _same_document(repository: Repository, listed: tuple[dict, str], payload: str, annotations: dict) -> str:
    """The digest of the listed artifact when it carries `payload` with `annotations` (created aside)."""
    descriptor, _ = listed
    try:
        body, _, digest = repository.manifest(descriptor["digest"])
    except NotFound:
        return ""
    manifest = Shape.parse(body, f"the artifact manifest {digest} of {repository.where}")
    layers = manifest.objects("layers")
    have = {k: v for k, v in manifest.mapping("annotations").items() if k != CREATED}
    if len(layers) == 1 and layers[0].text("digest") == payload and have == annotations:
        return digest
    return ""


def _put_artifact(
    repository: Repository, body: bytes, subject: str, *, descriptor: dict | None = None
) -> str:
    """PUT the artifact manifest `body` by its digest; index it under the subject's referrers tag unless
    the registry answered OCI-Subject (it indexes it itself). The path taken."""
    digest = _digest(body)
    response = repository.send(
        "PUT", f"manifests/{digest}", data=body, headers={"Content-Type": OCI_MANIFEST}
    )
    if response.status_code not in (200, 201):
        details = repository.details(response)
        raise EnvbuildError(
            f"registry {repository.parsed.registry} refused an OCI artifact manifest (artifactType, subject) "
            f"for {repository.where}@{subject} (HTTP {response.status_code}"
            + (f": {details}" if details else "")
            + ")",
            fix=f"check that you may push to {repository.where}; if {repository.parsed.registry} does not "
            "store OCI image manifests with artifactType and subject (OCI 1.1 artifacts), keep the "
            "documents as the build's files (build/<target>/) or push to a registry that does",
        )
    if response.headers.get("OCI-Subject", "").strip() == subject:
        return PATH_API
    manifest = Shape.parse(body, f"the artifact manifest {digest}")
    entry = {
        "mediaType": OCI_MANIFEST,
        "digest": digest,
        "size": len(body),
        "artifactType": manifest.text("artifactType") or None,
        "annotations": manifest.mapping("annotations"),
    }
    if descriptor is not None:
        entry = {**descriptor, "digest": digest, "size": len(body)}
    tag = referrers_tag(subject)
    try:
        current, _, _ = repository.manifest(tag)
        index = _index(current, f"the referrers tag {repository.where}:{tag}")
    except NotFound:
        index = Shape({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}, "a new referrers tag")
    listed = [m.raw for m in index_entries(index)]
    if any(m["digest"] == digest for m in listed):
        return PATH_TAG
    document = {**index.raw, "manifests": [*listed, entry]}
    repository.put_manifest(
        tag, json.dumps(document, sort_keys=True, separators=(",", ":")).encode(), OCI_INDEX
    )
    return PATH_TAG
