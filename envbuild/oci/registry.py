"""A small client for the registry HTTP API v2: pin a tag to its digest, list tags, promote by digest.

`resolve_digest("nvidia/cuda:12.4.1-runtime-ubuntu22.04")` asks the registry which manifest (or
manifest list / OCI index) the tag points at right now and returns its "sha256:..." digest;
`pinned(ref)` turns the reference into "name:tag@sha256:...", which always pulls the same bytes.

Authentication follows what `docker pull` does: anonymous first, then on a 401 the challenge in
WWW-Authenticate decides - a Bearer token from the realm it names (with the docker config's
credentials for that registry, when there are some), or HTTP basic with those credentials. The
credentials are looked up on the first challenge only, where the docker CLI looks (credHelpers,
credsStore, auths: envbuild.oci.credentials); an identity token is traded for an access token.
Credentials never appear in a message or an exception: no request header is ever quoted, and what a
registry says (its error bodies, the URLs it names) passes through `redact` before it is quoted.
A Bearer realm must be https, or plain http on the registry's own host and port: credentials and
token requests never go to another host over plain http. The registry's Authorization is sent to the
registry's own host only, never to a URL it names elsewhere (an upload Location).

`requests` is imported inside the functions: importing this module costs nothing at start-up.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import ipaddress
import json
import os
import re
import time

from envbuild._util import httpbody, limits
from envbuild._util.http import MAX_REDIRECTS, short_reason, with_retries
from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError, NotFound, UsageError
from envbuild.oci.credentials import Credentials, docker_config_path, find_credentials
from envbuild.oci.labels import VERIFIED
from envbuild.oci.reference import DIGEST_RE, TAG_RE, Reference, parse_reference
from envbuild.oci.shape import Shape, config_labels, config_platform, platform_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import IO

    import requests

MANIFEST_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


def pinned(ref: str, *, platform: str | None = None, **kwargs: object) -> str:
    """ "name:tag@sha256:..." for `ref`, keeping name and tag as written; a pinned ref is kept as is.

    With `platform` ("linux/arm64"), the digest is that platform's own manifest: for an image index
    (or manifest list) the entry the index names for it, not the index, so a build of that platform
    is reproducible on its own (`platform_manifest`). Keyword arguments go to `resolve_digest`
    (docker_config, timeout, retries).
    """
    parsed = parse_reference(ref)
    if parsed.digest:
        return ref.strip()
    digest = (
        resolve_digest(ref, **kwargs)  # type: ignore[arg-type]
        if platform is None
        else platform_manifest(ref, platform, **kwargs)  # type: ignore[arg-type]
    )
    return f"{parsed.name}:{parsed.tag}@{digest}"


class PlatformMissing(EnvbuildError):
    """The image has no manifest for the platform asked for; `platforms` lists those it has."""

    def __init__(self, message: str, *, fix: str, platforms: tuple[str, ...]) -> None:
        super().__init__(message, fix=fix)
        self.platforms = platforms


def platform_manifest(
    ref: str, platform: str, *, docker_config: str | None = None, timeout: float = 30, retries: int = 3
) -> str:
    """The "sha256:..." digest of `platform`'s manifest for `ref` ("linux/arm64", OCI's os/arch).

    An index or manifest list answers with the digest of its entry for the platform; a single
    manifest with its own digest, once its config says it is built for that platform (a config
    that names no architecture is taken as it is). PlatformMissing names the platforms the image
    has when `platform` is not one of them."""
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    body, media_type, digest = _fetch_manifest(session, parsed.digest or parsed.tag)
    manifest = json_object(body, _manifest_what(session, digest))
    if _is_index(manifest, media_type):
        entries = platform_entries(manifest)
        for name, entry in entries:
            if _same_platform(name, platform):
                return entry.digest()
        found = tuple(dict.fromkeys(name for name, _ in entries))
        raise PlatformMissing(
            f"{ref} is an image index without a {platform} manifest; it has "
            + (", ".join(found) or "no platform entries"),
            fix=f"use a base image published for {platform}, or drop {platform} from the target's platforms",
            platforms=found,
        )
    descriptor = manifest.obj("config")
    if descriptor is not None and descriptor.has("digest"):
        config_digest = descriptor.digest()
        config = json_object(_get_blob(session, config_digest), _config_what(session, config_digest))
        os_name, architecture, variant = config_platform(config)
        if architecture:
            have = f"{os_name or 'linux'}/{architecture}" + (f"/{variant}" if variant else "")
            if not _same_platform(have, platform):
                raise PlatformMissing(
                    f"{ref} is a single-platform image for {have}, not {platform}",
                    fix=f"use a base image published for {platform} (a multi-platform index, or a tag of "
                    f"its own), or drop {platform} from the target's platforms",
                    platforms=(have,),
                )
    return digest


def index_entries(index: Shape) -> list[Shape]:
    """The manifests an index lists, each checked: an object with a sha256 digest and, when given,
    a whole-number size and a platform object of strings."""
    entries = index.objects("manifests")
    for entry in entries:
        entry.digest()
        entry.size()
        platform_of(entry)
    return entries


def platform_entries(index: Shape) -> list[tuple[str, Shape]]:
    """(os/architecture[/variant], entry) for each manifest of an index that names a platform;
    attestation entries (platform unknown/unknown) are left out."""
    return [(name, entry) for entry in index_entries(index) if (name := platform_of(entry)) is not None]


def _same_platform(have: str, want: str) -> bool:
    """os/arch equal; a variant on one side only is the architecture's default (arm64 is v8)."""
    a, b = have.split("/"), want.split("/")
    return a[:2] == b[:2] and (len(a) < 3 or len(b) < 3 or a[2] == b[2])


def resolve_digest(
    ref: str, *, docker_config: str | None = None, timeout: float = 30, retries: int = 3
) -> str:
    """The "sha256:..." digest of the manifest `ref`'s tag points at; no network when ref has one.

    `retries` is how many more times a request is tried after a connection error, a timeout or a
    5xx answer, waiting 0.5 s, 1 s, 2 s, ... in between; 4xx answers are never retried.
    """
    parsed = parse_reference(ref)
    if parsed.digest:
        return parsed.digest
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    url = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/manifests/{parsed.tag}"
    headers = {"Accept": MANIFEST_ACCEPT}
    response = session.get(url, headers=headers)
    if response.status_code == 401:
        headers["Authorization"] = session.authorize(response)
        response = session.get(url, headers=headers)
        if response.status_code == 401:
            raise session.needs_credentials(response.status_code)
    if response.status_code == 403:
        raise session.needs_credentials(response.status_code)
    if response.status_code == 404:
        raise session.not_found(response, url.rsplit("/manifests/", 1)[0] + "/tags/list", headers)
    if response.status_code != 200:
        raise session.http_error(response)
    body = read_body(response, f"the manifest of {session.where}:{parsed.tag}", limits.MANIFEST_BYTES)
    return _served_digest(session, response, body, f"{session.where}:{parsed.tag}")


TAG_PAGES = 1000  # pages of a tag list followed (1000 tags a page; nvidia/cuda has about 5 pages)


def list_tags(
    repository: str, *, docker_config: str | None = None, timeout: float = 30, retries: int = 3
) -> tuple[str, list[str]]:
    """(the tag-list URL, every tag) of `repository` ("nvidia/cuda", "127.0.0.1:5000/nvidia/cuda"),
    following the Link header's pages as the distribution spec describes."""
    from urllib.parse import urljoin

    parsed = parse_reference(repository)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    first = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/tags/list"
    url: str | None = f"{first}?n=1000"
    tags: list[str] = []
    seen_pages: set[str] = set()
    total = 0
    while url and url not in seen_pages:
        if len(seen_pages) >= TAG_PAGES:  # a registry that names a new next page for ever
            raise EnvbuildError(
                f"the tag list of {session.where} goes on past {TAG_PAGES} pages (Link: rel=next)",
                fix="check the registry: no repository has that many tags; nothing was written",
            )
        seen_pages.add(url)
        response = session.send("GET", url, headers={"Accept": "application/json"})
        if response.status_code == 404:
            raise session.not_found(response, first, {})
        if response.status_code != 200:
            raise EnvbuildError(
                f"registry {parsed.registry} answered HTTP {response.status_code} "
                f"for the tags of {session.where}",
                fix="retry later; if it persists, check the registry's status",
            )
        body = read_body(response, f"the tag list of {session.where}", limits.DOCUMENT_BYTES)
        total += len(body)
        if total > limits.DOCUMENT_BYTES.get():  # all pages together, as they are kept in memory
            raise httpbody.too_large(
                response, "the tag list", limits.DOCUMENT_BYTES.get(), limits.DOCUMENT_BYTES
            )
        try:
            document = parse_json(body)
        except ValueError:
            document = None
        page = document.get("tags") if isinstance(document, dict) else None
        if page is None:
            page = []  # distribution answers "tags": null for a repository without tags
        if not isinstance(page, list) or not all(isinstance(tag, str) for tag in page):
            raise EnvbuildError(
                f"malformed tag list from {redact(url)}: 'tags' is not a list of strings",
                fix="nothing was written; retry later, and report it if it persists",
            )
        tags += page
        link = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', response.headers.get("Link", ""))
        url = urljoin(url, link.group(1)) if link else None
    return first, tags


def check_login(
    registry: str, *, docker_config: str | None = None, timeout: float = 10, retries: int = 1
) -> str:
    """What `docker login REGISTRY` checks, without writing anything: GET /v2/ with the login the
    docker config gives for it (envbuild.oci.credentials) through the registry's own challenge.

    Returns what was found ("answers without a login", "logged in as USER with SOURCE"); raises the
    EnvbuildError a pull or push would (no login: `docker login REGISTRY`; a refused login; a helper
    that fails; an unreachable registry). `envbuild doctor --registry` shows the answer."""
    parsed = parse_reference(f"{registry}/ping")
    parsed = Reference(
        name=parsed.registry,
        registry=parsed.registry,
        api_host=parsed.api_host,
        repository="",
        tag="",
        digest=None,
    )
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    url = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/"
    response = session.request("GET", url)
    if response.status_code == 401:
        credentials = session.credentials
        if credentials is None:  # an anonymous token would do for a pull, never for a push
            raise session.needs_credentials(401)
        response = session.request("GET", url, headers={"Authorization": session.authorize(response)})
        if response.status_code in (401, 403):
            raise session.needs_credentials(response.status_code)
        if response.status_code == 200:
            who = f"as {credentials.username} " if credentials.username else "with an identity token "
            return f"logged in {who}(from {credentials.source})"
    if response.status_code == 200:
        return "answers GET /v2/ without a login"
    raise EnvbuildError(
        f"registry {parsed.registry} answered HTTP {response.status_code} to GET /v2/",
        fix=f"check that {parsed.registry} is a registry (API v2) and that it is up",
    )


# --- registry-side promotion: read a manifest and its config, put the same bytes under new tags --------

INDEX_MEDIA_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


def fetch_manifest(
    ref: str, *, docker_config: str | None = None, timeout: float = 30, retries: int = 3
) -> tuple[bytes, str, str]:
    """(the manifest's bytes exactly as served, its media type, its "sha256:..." digest) for `ref`.

    A ref with "@sha256:..." is fetched by digest (and the bytes are checked against it), else by tag;
    the Accept header and the auth flow are those of `resolve_digest`.
    """
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    return _fetch_manifest(session, parsed.digest or parsed.tag)


def put_manifest(
    ref: str,
    body: bytes,
    media_type: str,
    *,
    docker_config: str | None = None,
    timeout: float = 30,
    retries: int = 3,
) -> str:
    """PUT `body` (the exact bytes) as the manifest of `ref`'s tag; the digest the registry answers.

    A Bearer token is asked for with scope "repository:<repo>:pull,push".
    """
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    return _put_manifest(session, parsed.tag, body, media_type)


def image_config_labels(ref: str, *, docker_config: str | None = None, timeout: float = 30) -> dict[str, str]:
    """The labels of the image `ref`'s manifest points at (of its linux/amd64 entry, or the first one,
    when it is an index or a manifest list); {} when the image has none. No layer is downloaded."""
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=3)
    body, media_type, _ = _fetch_manifest(session, parsed.digest or parsed.tag)
    return _config_labels(session, body, media_type)


def promote_by_digest(
    ref: str,
    to: list[str],
    *,
    docker_config: str | None = None,
    vouch: Callable[[str], object] | None = None,
) -> list[tuple[str, str]]:
    """Tag the verified image `ref` ("name@sha256:...") as each of `to` inside its registry.

    A target is a bare tag (same repository) or "[registry/]repo:tag" on the same registry host. The
    image's config must carry io.envbuild.verified=true (set by `envbuild promote`), unless `vouch` is
    given: it is called with the image id (the config digest) the registry holds, before any tag is
    written, and raises to refuse (envbuild promote --to --report: its report file). The manifest's
    exact bytes are PUT under each new tag, so every tag has the source digest; in another repository
    of the same registry, the blobs are mounted from the source first. No layer is pulled or pushed.
    Returns [(full ref, digest), ...] in the order of `to`.
    """
    parsed = parse_reference(ref)
    if not parsed.digest:
        raise UsageError(
            f"promote by digest needs a reference pinned by digest, not {ref.strip()!r}",
            fix=f"pass NAME@sha256:<digest>, e.g. `{parsed.name}@$(docker buildx imagetools inspect "
            f"{parsed.name}:{parsed.tag} --format '{{{{.Manifest.Digest}}}}')`, or pin it with envbuild's "
            "resolve_digest",
        )
    if not to:
        raise UsageError(
            "promote by digest needs at least one target tag", fix="e.g. to=['v1'] or ['repo:v1']"
        )
    targets = [_promotion_target(parsed, target) for target in to]

    session = _Session(parsed, docker_config=docker_config, timeout=30, retries=3)
    body, media_type, digest = _fetch_manifest(session, parsed.digest)
    image_id, labels = _config(session, body, media_type)
    if vouch is not None:  # a passing verify report (envbuild verify --report) vouches for it
        vouch(image_id)
    elif labels.get(VERIFIED) != "true":
        raise EnvbuildError(
            f"{ref.strip()} was not verified by envbuild (no {VERIFIED} label): refusing to promote",
            fix=f"run envbuild verify {ref.strip()} --report FILE, then envbuild promote --report FILE "
            "--tag ... --push first, and promote the digest that push reports",
        )

    promoted: list[tuple[str, str]] = []
    for target in targets:
        if target.repository == parsed.repository:
            target_session = session
        else:
            target_session = _Session(target, docker_config=docker_config, timeout=30, retries=3)
            _copy_references(session, target_session, body, media_type)
        answered = _put_manifest(target_session, target.tag, body, media_type)
        full = f"{target.name}:{target.tag}"
        if answered != digest:
            raise EnvbuildError(
                f"registry {target.registry} stored {full} as {answered}, not as the source digest {digest}",
                fix="the registry rewrote the manifest; promote with `docker buildx imagetools create` "
                "or use a registry that keeps manifests byte for byte",
            )
        promoted.append((full, answered))
    return promoted


# --- a multi-platform image: one OCI index over per-platform images already in a repository -----------

OCI_INDEX = "application/vnd.oci.image.index.v1+json"


class ImagePlatform(Record):
    """What the registry holds under one per-platform image digest: its manifest descriptor (media
    type, size), its image id (the config digest, which a verify report names) and the platform and
    labels its config records."""

    __slots__ = ("digest", "media_type", "size", "image_id", "os", "architecture", "variant", "labels")
    digest: str
    media_type: str
    size: int
    image_id: str
    os: str
    architecture: str
    variant: str
    labels: dict[str, str]

    def descriptor(self) -> dict:
        """The index entry of this image: OCI image-index `manifests[]` with its `platform`."""
        platform = {"architecture": self.architecture, "os": self.os}
        if self.variant:
            platform["variant"] = self.variant
        return {"digest": self.digest, "mediaType": self.media_type, "platform": platform, "size": self.size}


def image_platform(ref: str, *, docker_config: str | None = None, timeout: float = 30) -> ImagePlatform:
    """The platform image `ref` ("name@sha256:...") as the registry holds it.

    The manifest is looked up with HEAD first, so an image that was never pushed to this repository is
    refused with what to do; an index is refused too (an index entry must be one platform's image)."""
    parsed = parse_reference(ref)
    if not parsed.digest:
        raise UsageError(
            f"a platform image of an index must be pinned by digest, not {ref.strip()!r}",
            fix="pass NAME@sha256:<digest>, the digest its push reported",
        )
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=3)
    head = session.send("HEAD", _manifest_url(session, parsed.digest), headers={"Accept": MANIFEST_ACCEPT})
    if head.status_code == 404:
        raise EnvbuildError(
            f"manifest {parsed.digest} is not in {session.where}: an index may only list images of "
            "its own repository",
            fix=f"push each platform's image to {parsed.name} first (by digest), then promote the digests "
            "its pushes reported",
        )
    body, media_type, digest = _fetch_manifest(session, parsed.digest)
    manifest = json_object(body, _manifest_what(session, digest))
    if _is_index(manifest, media_type):
        raise UsageError(
            f"{ref.strip()} is already an index (a multi-platform image), not one platform's image",
            fix="pass the digest of each platform's image manifest",
        )
    image_id, _ = _config(session, body, media_type)
    config = json_object(_get_blob(session, image_id), _config_what(session, image_id))
    os_name, architecture, variant = config_platform(config)
    return ImagePlatform(
        digest=digest,
        media_type=media_type or manifest.text("mediaType"),
        size=len(body),
        image_id=image_id,
        os=os_name,
        architecture=architecture,
        variant=variant,
        labels=config_labels(config),
    )


def index_body(images: list[ImagePlatform]) -> bytes:
    """The OCI image index over `images`, as the exact bytes pushed: sorted keys, no spaces, so the
    same images always give the same index digest."""
    document = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [image.descriptor() for image in images],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def push_index(
    repository: str, images: list[ImagePlatform], *, docker_config: str | None = None, timeout: float = 30
) -> str:
    """PUT the index over `images` (each already in `repository`, see image_platform) by its digest,
    and return that digest; tagging it is promote_by_digest's job. Two images of one platform are
    refused: a puller could not tell which one it gets."""
    seen: dict[tuple[str, str, str], str] = {}
    for image in images:
        key = (image.os, image.architecture, image.variant)
        if key in seen:
            raise UsageError(
                f"{seen[key]} and {image.digest} are both {'/'.join(k for k in key if k)}: an index "
                "holds one image per platform",
                fix="pass one verified image per platform",
            )
        seen[key] = image.digest
    if not images:
        raise UsageError(
            "an index needs at least one platform image", fix="pass REPO@sha256:... per platform"
        )
    body = index_body(images)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    parsed = parse_reference(f"{repository}@{digest}")
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=3)
    answered = _put_manifest(session, digest, body, OCI_INDEX)
    if answered != digest:
        raise EnvbuildError(
            f"registry {parsed.registry} stored the index as {answered}, not as {digest}",
            fix="use a registry that keeps manifests byte for byte",
        )
    return digest


def stream_layers(
    ref: str, *, docker_config: str | None = None, timeout: float = 60, retries: int = 3
) -> Iterator[tuple[str, str, IO[bytes]]]:
    """(digest, media type, a reader of the blob as stored) for each layer of `ref`, bottom layer first.

    For `envbuild audit REPO@sha256:...`: the layers are read one at a time as the registry streams
    them, never pulled into the Engine nor held whole in memory. An index (or manifest list) gives its
    linux/amd64 image. Each reader must be read to its end before the next layer is asked for (the
    generator drains what is left); its bytes are checked against the layer's digest there, and a
    mismatch raises before the next layer: a caller uses what it read only once the generator is done.
    """
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=retries)
    body, media_type, digest = _fetch_manifest(session, parsed.digest or parsed.tag)
    manifest = json_object(body, _manifest_what(session, digest))
    if _is_index(manifest, media_type):
        digest = _platform_entry(manifest, session.where).digest()
        body, media_type, _ = _fetch_manifest(session, digest)
        manifest = json_object(body, _manifest_what(session, digest))
    layers = manifest_layers(manifest, _manifest_what(session, digest), media_type)
    base = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/blobs"
    for layer in layers:
        digest = layer.digest()
        # identity: the blob as stored, which its digest names (no proxy compresses it on the way)
        response = session.send("GET", f"{base}/{digest}", headers={"Accept-Encoding": "identity"})
        try:
            if response.status_code != 200:
                details = _error_details(response)
                raise EnvbuildError(
                    f"registry {parsed.registry} answered HTTP {response.status_code} for layer {digest} "
                    f"of {session.where}" + (f" ({details})" if details else ""),
                    fix="check that the image was pushed completely; retry later if the registry is busy",
                )
            reader = _CheckedReader(response, digest, session.where, declared=layer.size())
            yield digest, layer.text("mediaType"), reader
            reader.finish()
        finally:
            response.close()


class _CheckedReader:
    """A layer blob as a file to read from, hashed as it is read (its bytes as sent, no transfer
    decoding). The body comes through _util.httpbody: it stops past the size the manifest declares
    for the layer (its digest is checked, so no genuine layer is longer), which may not exceed
    LAYER_BYTES (ENVBUILD_MAX_LAYER_BYTES); its deadline is ENVBUILD_HTTP_DEADLINE_S plus a second per
    LAYER_RATE bytes declared (a genuine 4 GiB CUDA layer on a slow link is not cut off, a trickle
    is); a broken connection is a clear error."""

    def __init__(self, response: requests.Response, digest: str, where: str, *, declared: int | None) -> None:
        what = f"layer {digest} of {where}"
        most = limits.LAYER_BYTES.get()
        if declared is not None and declared > most:
            raise EnvbuildError(
                f"{what} declares {limits.size(declared)}, more than envbuild reads ({limits.size(most)})",
                fix=f"if the image is genuine, raise {limits.LAYER_BYTES.env} (now {most})",
            )
        expected = most if declared is None else declared
        self.chunks = httpbody.chunks(
            response,
            what=what,
            limit=expected if declared is not None else limits.LAYER_BYTES,
            started=getattr(response, "envbuild_started", None),
            decode=False,  # hashed as stored, as before: a Content-Encoding is not undone
            seconds=limits.HTTP_DEADLINE_S.get() + expected / limits.LAYER_RATE.get(),
        )
        self.buffer = bytearray()
        self.done = False
        self.digest = digest
        self.where = where
        self.hash = hashlib.sha256()

    def _more(self) -> bool:
        if self.done:
            return False
        chunk = next(self.chunks, None)
        if chunk is None:
            self.done = True
            return False
        self.hash.update(chunk)
        self.buffer += chunk
        return True

    def read(self, size: int = -1) -> bytes:
        whole = size is None or size < 0
        while (whole or len(self.buffer) < size) and self._more():
            pass
        cut = len(self.buffer) if whole else size
        data = bytes(self.buffer[:cut])
        del self.buffer[:cut]  # a bytearray drops its front without copying the rest
        return data

    def finish(self) -> None:
        """Read what the consumer left (a tar's end padding) and check the digest of it all."""
        self.buffer.clear()
        while self._more():
            self.buffer.clear()
        if "sha256:" + self.hash.hexdigest() != self.digest:
            raise EnvbuildError(
                f"layer {self.digest} of {self.where} does not match its digest",
                fix="the registry or a proxy altered it; retry, and check the registry's storage",
            )


# --- one repository, many requests: what oci.referrers builds on ------------------------------------


class Repository:
    """One repository of a registry behind one auth handshake, for a caller that makes many requests
    (oci.referrers: read a subject, upload blobs, put an artifact manifest, keep the referrers tag).

    `ref` is "registry/repo" (a tag or digest on it is ignored). Every method goes through the same
    session as the functions above: the same retries, credentials looked up once, the same errors."""

    def __init__(self, ref: str, *, docker_config: str | None = None, timeout: float = 30, retries: int = 3):
        parsed = parse_reference(ref)
        self.parsed = Reference(
            name=parsed.name,
            registry=parsed.registry,
            api_host=parsed.api_host,
            repository=parsed.repository,
            tag="latest",
            digest=None,
        )
        self.session = _Session(self.parsed, docker_config=docker_config, timeout=timeout, retries=retries)
        self.push_scope = f"repository:{self.parsed.repository}:pull,push"

    @property
    def name(self) -> str:
        """ "registry/repo" as written (docker.io names as the user wrote them)."""
        return self.parsed.name

    @property
    def where(self) -> str:
        return self.session.where

    def url(self, path: str) -> str:
        """The API URL of `path` under /v2/<repo>/ ("manifests/v1", "referrers/sha256:...")."""
        parsed = self.parsed
        return f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/{path}"

    def send(self, method: str, path: str, **kwargs: object) -> requests.Response:
        """One request to `path` under /v2/<repo>/, with the auth handshake (push scope for writes)."""
        if method not in ("GET", "HEAD"):
            kwargs.setdefault("scope", self.push_scope)
        return self.session.send(method, self.url(path), **kwargs)  # type: ignore[arg-type]

    def manifest(self, reference: str) -> tuple[bytes, str, str]:
        """(bytes as served, media type, digest) of a tag's or digest's manifest; a digest is checked.
        A missing one raises NotFound."""
        return _fetch_manifest(self.session, reference)

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> tuple[str, dict[str, str]]:
        """PUT `body` as the manifest `reference` (a tag or its own digest): (the digest the registry
        answered, the answer's headers, e.g. OCI-Subject)."""
        response = _put_manifest_response(self.session, reference, body, media_type)
        header = response.headers.get("Docker-Content-Digest", "").strip()
        digest = header if DIGEST_RE.fullmatch(header) else "sha256:" + hashlib.sha256(body).hexdigest()
        return digest, dict(response.headers)

    def blob(self, digest: str) -> bytes:
        """A blob's bytes, checked against its digest."""
        return _get_blob(self.session, digest)

    def push_blob(self, data: bytes) -> str:
        """Upload `data` as a blob unless the repository has it (HEAD first); its "sha256:..." digest.

        A monolithic upload: POST opens the session, one PUT with ?digest= closes it with the bytes."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.send("HEAD", f"blobs/{digest}", scope=self.push_scope).status_code == 200:
            return digest
        started = self.send("POST", "blobs/uploads/")
        location = started.headers.get("Location", "")
        if started.status_code != 202 or not location:
            raise self._refused(started, f"an upload of blob {digest}")
        host = self.parsed.api_host
        url = location if "://" in location else f"{registry_scheme(host)}://{host}{location}"
        done = self.session.send(
            "PUT",
            url,
            params={"digest": digest},
            data=data,
            headers={"Content-Type": "application/octet-stream"},
            scope=self.push_scope,
        )
        if done.status_code not in (201, 204):
            raise self._refused(done, f"blob {digest}")
        return digest

    def mount_blob(self, source: Repository, digest: str) -> None:
        """Make blob `digest` of `source` (same registry) present here by a cross-repository mount."""
        _mount_blob(source.session, self.session, digest)

    def details(self, response: requests.Response) -> str:
        """ "CODE: message; ..." of a registry error answer, redacted; "" when it has none."""
        return _error_details(response)

    def _refused(self, response: requests.Response, what: str) -> EnvbuildError:
        details = _error_details(response)
        return EnvbuildError(
            f"registry {self.parsed.registry} refused {what} in {self.where} (HTTP {response.status_code}"
            + (f": {details}" if details else "")
            + ")",
            fix="check that you may push to this repository (docker login), and retry later if the "
            "registry is busy",
        )


def _promotion_target(source: Reference, target: str) -> Reference:
    text = target.strip() if isinstance(target, str) else ""
    if text and "/" not in text and ":" not in text and "@" not in text:
        if not TAG_RE.fullmatch(text):
            raise UsageError(
                f"promotion target {target!r} is not a valid tag",
                fix="a tag is up to 128 of letters, digits, '_', '.', '-', not starting with '.' or '-'",
            )
        return Reference(
            name=source.name,
            registry=source.registry,
            api_host=source.api_host,
            repository=source.repository,
            tag=text,
            digest=None,
        )
    parsed = parse_reference(text)
    if parsed.digest:
        raise UsageError(
            f"promotion target {target!r} carries a digest; a target is a tag",
            fix="name the target as TAG or REPO:TAG",
        )
    if parsed.api_host.lower() != source.api_host.lower():
        raise UsageError(
            f"promotion target {target!r} is on registry {parsed.registry}, not on {source.registry}: "
            "promotion by digest stays inside one registry",
            fix=f"name a target on {source.registry} (e.g. {source.registry}/REPO:TAG or a bare tag); "
            "copying between registries needs `docker buildx imagetools create` or skopeo",
        )
    return parsed


def _manifest_url(session: _Session, reference: str) -> str:
    parsed = session.parsed
    return (
        f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/manifests/{reference}"
    )


def _fetch_manifest(session: _Session, reference: str) -> tuple[bytes, str, str]:
    url = _manifest_url(session, reference)
    headers = {"Accept": MANIFEST_ACCEPT}
    response = session.send("GET", url, headers=headers)
    if response.status_code == 404:
        if session.authorization:
            headers["Authorization"] = session.authorization
        raise session.not_found(
            response, url.rsplit("/manifests/", 1)[0] + "/tags/list", headers, reference=reference
        )
    if response.status_code != 200:
        raise session.http_error(response, reference=reference)
    at = "@" if DIGEST_RE.fullmatch(reference) else ":"
    body = read_body(response, f"the manifest {session.where}{at}{reference}", limits.MANIFEST_BYTES)
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    if DIGEST_RE.fullmatch(reference) and computed != reference:
        raise EnvbuildError(
            f"registry {session.parsed.registry} served {session.where}@{reference} with content whose "
            f"digest is {computed}",
            fix="the registry or a proxy altered the manifest; retry, and check the registry's storage",
        )
    digest = _served_digest(session, response, body, f"{session.where}{at}{reference}")
    media_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip()
    if not media_type or media_type in ("application/json", "application/octet-stream"):
        with contextlib.suppress(ValueError, AttributeError):
            named = parse_json(body).get("mediaType")
            media_type = named if isinstance(named, str) and named else media_type
    return body, media_type, digest


def _served_digest(session: _Session, response: requests.Response, body: bytes, what: str) -> str:
    """The digest of the manifest `body` as read: the sha256 of its bytes. A Docker-Content-Digest
    header is never taken on trust (a tag resolved to it would pin other bytes than were served):
    one that names another digest is refused."""
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    header = response.headers.get("Docker-Content-Digest", "").strip()
    if header and header != computed:
        raise EnvbuildError(
            f"registry {session.parsed.registry} served {what} with Docker-Content-Digest "
            f"{redact(header[:100])}, but the manifest it sent has digest {computed}",
            fix="the registry or a proxy between altered the manifest or its headers: nothing was pinned; "
            "retry, and check the registry (and any proxy) before trusting this image",
        )
    return computed


def _put_manifest(session: _Session, tag: str, body: bytes, media_type: str) -> str:
    response = _put_manifest_response(session, tag, body, media_type)
    header = response.headers.get("Docker-Content-Digest", "").strip()
    if DIGEST_RE.fullmatch(header):
        return header
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _put_manifest_response(session: _Session, tag: str, body: bytes, media_type: str) -> requests.Response:
    """The registry's answer to the PUT (its headers say more: OCI-Subject); an error raises."""
    parsed = session.parsed
    url = _manifest_url(session, tag)
    response = session.send(
        "PUT",
        url,
        headers={"Content-Type": media_type},
        data=body,
        scope=f"repository:{parsed.repository}:pull,push",
    )
    if response.status_code not in (200, 201):
        details = _error_details(response)
        fix = (
            "check that the manifest's blobs are in the repository (push the image first)"
            if response.status_code < 500
            else "retry later; if it persists, check the registry's status"
        )
        if response.status_code in (405, 501):
            fix = "the registry does not accept pushes here (read-only or a pull-through cache)"
        raise EnvbuildError(
            f"registry {parsed.registry} refused the manifest for {session.where}:{tag} "
            f"(HTTP {response.status_code}" + (f": {details}" if details else "") + ")",
            fix=fix,
        )
    return response


def _get_blob(session: _Session, digest: str) -> bytes:
    parsed = session.parsed
    url = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/blobs/{digest}"
    response = session.send("GET", url)
    if response.status_code != 200:
        details = _error_details(response)
        raise EnvbuildError(
            f"registry {parsed.registry} answered HTTP {response.status_code} for blob {digest} of "
            f"{session.where}" + (f" ({details})" if details else ""),
            fix="check that the image was pushed completely; retry later if the registry is busy",
        )
    body = read_body(response, f"blob {digest} of {session.where}", limits.DOCUMENT_BYTES)
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise EnvbuildError(
            f"blob {digest} of {session.where} does not match its digest",
            fix="the registry or a proxy altered it; retry, and check the registry's storage",
        )
    return body


def json_object(body: bytes, what: str) -> Shape:
    """The JSON object a registry served as `what`, for typed reading (oci.shape); anything else is
    an EnvbuildError naming it."""
    return Shape.parse(body, what)


def _manifest_what(session: _Session, digest: str) -> str:
    return f"the manifest {digest} of {session.where}"


def _config_what(session: _Session, digest: str) -> str:
    return f"the config blob {digest} of {session.where}"


def _platform_entry(index: Shape, where: str, platform: str = "linux/amd64") -> Shape:
    """The index's entry for `platform`, else its first (an index without platform fields)."""
    entries = index_entries(index)
    if not entries:
        raise EnvbuildError(f"the image index of {where} lists no manifests", fix="push the image again")
    for name, entry in platform_entries(index):
        if _same_platform(name, platform):
            return entry
    return entries[0]


def _is_index(manifest: Shape, media_type: str) -> bool:
    return (
        media_type in INDEX_MEDIA_TYPES
        or manifest.text("mediaType") in INDEX_MEDIA_TYPES
        or ("manifests" in manifest.raw and "config" not in manifest.raw)
    )


def config_descriptor(manifest: Shape, what: str, media_type: str) -> str:
    """The digest of the image config a manifest names; a manifest without one is refused."""
    descriptor = manifest.obj("config")
    if descriptor is None or not descriptor.has("digest"):
        raise EnvbuildError(
            f"{what} names no sha256 config blob ({media_type or 'no media type'})",
            fix="push the image with a current docker or buildx (image manifest v2 or OCI)",
        )
    descriptor.size()
    return descriptor.digest()


def manifest_layers(manifest: Shape, what: str, media_type: str) -> list[Shape]:
    """The layer descriptors of an image manifest, each with a sha256 digest and, when given, a
    whole-number size and a string media type. The rest of the manifest is checked too, though a
    layer reader needs none of it: a config descriptor, when given, is one; annotations are strings."""
    config = manifest.obj("config")
    if config is not None:
        config.digest()
        config.size()
    manifest.mapping("annotations")
    if not isinstance(manifest.raw.get("layers"), list):
        if manifest.has("layers"):
            manifest.objects("layers")  # the error naming the field's type
        raise EnvbuildError(
            f"{what} lists no layers ({media_type or 'no media type'})",
            fix="push the image with a current docker or buildx (image manifest v2 or OCI)",
        )
    layers = manifest.objects("layers")
    for layer in layers:
        layer.digest()
        layer.size()
        layer.text("mediaType")
    return layers


def image_config(
    ref: str, *, platform: str = "linux/amd64", docker_config: str | None = None, timeout: float = 30
) -> tuple[str, dict]:
    """(image id, config document) of `ref` as its registry holds it; an index gives `platform`'s image.

    For runtimes that take an image by digest with no Docker Engine to ask (Apptainer, Enroot,
    Charliecloud): the image id is what a verify report names and `promote --to --report` checks, and
    the config says the image's platform, USER and ENV."""
    parsed = parse_reference(ref)
    session = _Session(parsed, docker_config=docker_config, timeout=timeout, retries=3)
    body, media_type, digest = _fetch_manifest(session, parsed.digest or parsed.tag)
    manifest = json_object(body, _manifest_what(session, digest))
    if _is_index(manifest, media_type):
        entry = _platform_entry(manifest, session.where, platform)
        body, media_type, _ = _fetch_manifest(session, entry.digest())
    image_id, _ = _config(session, body, media_type)
    config = json_object(_get_blob(session, image_id), _config_what(session, image_id))
    config_platform(config)
    config_labels(config)
    settings = config.obj("config")
    if settings is not None:  # what the runtimes read: the image's user (its Env they filter themselves,
        settings.text("User")  # keeping only KEY=VALUE strings: runtime.driver._env)
    return image_id, config.raw


def _config_labels(session: _Session, body: bytes, media_type: str) -> dict[str, str]:
    return _config(session, body, media_type)[1]


def _config(session: _Session, body: bytes, media_type: str) -> tuple[str, dict[str, str]]:
    """(config digest, which is the image id Docker shows, and the config's labels)."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    manifest = json_object(body, _manifest_what(session, digest))
    if _is_index(manifest, media_type):
        entry = _platform_entry(manifest, session.where)
        digest = entry.digest()
        body, media_type, _ = _fetch_manifest(session, digest)
        manifest = json_object(body, _manifest_what(session, digest))
    config_digest = config_descriptor(manifest, _manifest_what(session, digest), media_type)
    config = json_object(_get_blob(session, config_digest), _config_what(session, config_digest))
    return config_digest, config_labels(config)


def _copy_references(source: _Session, target: _Session, body: bytes, media_type: str) -> None:
    """Make what the manifest refers to present in the target repository of the same registry:
    blobs are mounted from the source repository, an index's manifests are put by digest."""
    manifest = json_object(body, _manifest_what(source, "sha256:" + hashlib.sha256(body).hexdigest()))
    if _is_index(manifest, media_type):
        for entry in index_entries(manifest):
            child_digest = entry.digest()
            child, child_type, _ = _fetch_manifest(source, child_digest)
            _copy_references(source, target, child, child_type)
            if _put_manifest(target, child_digest, child, child_type) != child_digest:
                raise EnvbuildError(
                    f"registry {target.parsed.registry} stored manifest {child_digest} under another digest",
                    fix="use a registry that keeps manifests byte for byte",
                )
        return
    config = manifest.obj("config")
    for blob in [*([config] if config is not None else []), *manifest.objects("layers")]:
        _mount_blob(source, target, blob.digest())


def _mount_blob(source: _Session, target: _Session, digest: str) -> None:
    parsed = target.parsed
    base = f"{registry_scheme(parsed.api_host)}://{parsed.api_host}/v2/{parsed.repository}/blobs"
    scopes = [f"repository:{parsed.repository}:pull,push", f"repository:{source.parsed.repository}:pull"]
    if target.send("HEAD", f"{base}/{digest}", scope=scopes).status_code == 200:
        return
    response = target.send(
        "POST",
        f"{base}/uploads/",
        params={"mount": digest, "from": source.parsed.repository},
        scope=scopes,
    )
    if response.status_code == 201:
        return
    if response.status_code == 202:  # the registry started an upload instead: cancel it, say why
        location = response.headers.get("Location", "")
        if location:
            url = (
                location
                if "://" in location
                else f"{registry_scheme(parsed.api_host)}://{parsed.api_host}{location}"
            )
            with contextlib.suppress(EnvbuildError):
                target.send("DELETE", url, scope=scopes)
    details = _error_details(response)
    raise EnvbuildError(
        f"registry {parsed.registry} did not mount blob {digest} from {source.parsed.repository} into "
        f"{parsed.repository} (HTTP {response.status_code}" + (f": {details}" if details else "") + ")",
        fix="promote to a tag in the source repository, or push the image to the target repository",
    )


def read_body(response: requests.Response, what: str, limit: limits.Limit | int) -> bytes:
    """The body of a registry's answer, within `limit` bytes and the request's deadline
    (HTTP_DEADLINE_S from the first request of its redirect chain): _util.httpbody.read."""
    return httpbody.read(
        response, what=what, limit=limit, started=getattr(response, "envbuild_started", None)
    )


ERROR_BODY_BYTES = 64 * 1024  # an error answer's body is read this far for its codes, then dropped


def _errors(response: requests.Response) -> list:
    """The "errors" list of a registry's error answer, read once (at most ERROR_BODY_BYTES) and kept
    on the response; [] when the body is longer, not JSON, or has none."""
    cached = getattr(response, "envbuild_errors", None)
    if cached is not None:
        return cached
    errors: list = []
    if response.request is None or response.request.method != "HEAD":
        try:
            document = parse_json(read_body(response, "an error answer", ERROR_BODY_BYTES))
        except (EnvbuildError, ValueError, RuntimeError):  # too long, cut, not JSON, read already
            document = None
        found = document.get("errors") if isinstance(document, dict) else None
        errors = found if isinstance(found, list) else []
    response.envbuild_errors = errors  # type: ignore[attr-defined]
    return errors


def _error_details(response: requests.Response) -> str:
    """ "CODE: message; ..." from a registry error body; "" when it has none."""
    errors = _errors(response)
    parts = []
    for error in errors:
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            parts.append(": ".join(str(x) for x in (code, message) if x))
    return redact("; ".join(p for p in parts if p))  # a registry may echo what it was sent


def registry_scheme(host: str) -> str:
    """ "http" for loopback hosts and those in ENVBUILD_INSECURE_REGISTRIES, "https" otherwise."""
    insecure = {h.strip().lower() for h in os.environ.get("ENVBUILD_INSECURE_REGISTRIES", "").split(",")}
    if host.lower() in insecure - {""}:
        return "http"
    return "http" if _is_loopback(_host_only(host)) else "https"


def _host_only(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_loopback(hostname: str) -> bool:
    if hostname.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, the default port filled in; None for anything else."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:  # a port that is not a number, a bracket left open
        return None
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host, port or (443 if scheme == "https" else 80)


def _parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    params = {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in re.finditer(r'(\w+)\s*=\s*(?:"([^"]*)"|([^,\s]+))', rest)
    }
    return scheme.lower(), params


class _Session:
    """One resolution: the retrying GET, the auth handshake and the error messages."""

    def __init__(self, parsed: Reference, *, docker_config: str | None, timeout: float, retries: int) -> None:
        import requests

        self.parsed = parsed
        self.docker_config = docker_config
        self.timeout = timeout
        self.retries = max(0, int(retries))

        class Session(requests.Session):
            def get_redirect_target(self, resp: requests.Response) -> None:
                """None: redirects are _follow's. requests reads a redirect's whole body, however
                long, even with allow_redirects=False (to prepare Response.next)."""
                return None

        self.http = Session()
        self.found: list[Credentials | None] = []  # looked up on the first challenge, then kept
        self.authorization: str | None = None

    @property
    def credentials(self) -> Credentials | None:
        """The docker config's login for this registry (envbuild.oci.credentials), looked up when a
        registry first asks for one: anonymous access never runs a credential helper."""
        if not self.found:
            self.found.append(find_credentials(self.parsed.registry, self.docker_config))
        return self.found[0]

    @property
    def where(self) -> str:
        return f"{self.parsed.registry}/{self.parsed.repository}"

    def get(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("GET", url, **kwargs)

    def request(self, method: str, url: str, **kwargs: object) -> requests.Response:
        """One request, retried after a connection error, a timeout or a 5xx answer."""
        import requests

        host = re.sub(r"^\w+://", "", url).split("/", 1)[0]

        def unreachable(attempts: int, exc: BaseException) -> EnvbuildError:
            return EnvbuildError(
                f"registry {host} is unreachable after {attempts} attempt(s): {short_reason(exc)}",
                fix=f"check that {host} is the right host and port, that it is running and "
                "that this machine can reach it (network, proxy, firewall)",
            )

        try:
            return with_retries(
                lambda: self._follow(method, url, dict(kwargs)),
                retries=self.retries,
                unreachable=unreachable,
            )
        except requests.exceptions.SSLError as exc:
            raise EnvbuildError(
                f"TLS handshake with registry {host} failed: {short_reason(exc)}",
                fix=f"if {host} serves plain http, list it in ENVBUILD_INSECURE_REGISTRIES "
                f"(comma-separated host:port); otherwise check its certificate",
            ) from None

    def _follow(self, method: str, url: str, kwargs: dict) -> requests.Response:
        """One request and the redirects it is answered with, followed here rather than by requests:
        requests reads each redirect's whole body into memory, however long. Every answer is streamed
        (its body is read by read_body, bounded) and carries `envbuild_started`, when the chain began,
        for the deadline. A redirect to another origin drops the Authorization header and the `auth`
        credentials; a 301/302/303 turns a non-HEAD request into a body-less GET, as browsers and
        requests do. More than MAX_REDIRECTS is requests' TooManyRedirects (_util.http names the loop)."""
        from urllib.parse import urljoin

        import requests

        started = time.monotonic()
        first = _origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            response = httpbody.answered(
                lambda url=url, method=method: self.http.request(
                    method, url, timeout=self.timeout, stream=True, allow_redirects=False, **kwargs
                ),
                url=url,
                started=started,
            )
            response.envbuild_started = started  # type: ignore[attr-defined]
            location = response.headers.get("Location", "")
            if not (response.is_redirect and location):
                return response
            response.close()  # its body is never read
            url = urljoin(response.url, location)
            kwargs.pop("params", None)
            if response.status_code in (301, 302, 303) and method != "HEAD":
                method = "GET"
                kwargs.pop("data", None)
            if _origin(url) != first:
                kwargs["headers"] = {
                    k: v for k, v in (kwargs.get("headers") or {}).items() if k.lower() != "authorization"
                }
                kwargs.pop("auth", None)
        raise requests.exceptions.TooManyRedirects(
            f"Exceeded {MAX_REDIRECTS} redirects.", request=response.request, response=response
        )

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        scope: object = None,
        **kwargs: object,
    ) -> requests.Response:
        """`request` with the auth handshake: the session's last Authorization first, then on a 401 a
        new one for `scope` (a str or a list of "repository:<repo>:<actions>"; None: the challenge's)."""
        headers = dict(headers or {})
        if not self.is_registry(url):  # e.g. an upload Location elsewhere: no credential goes there
            headers.pop("Authorization", None)
            return self.request(method, url, headers=headers, **kwargs)
        if self.authorization:
            headers["Authorization"] = self.authorization
        response = self.request(method, url, headers=headers, **kwargs)
        if response.status_code == 401:
            response.close()
            self.authorization = self.authorize(response, scope=scope)
            headers["Authorization"] = self.authorization
            response = self.request(method, url, headers=headers, **kwargs)
            if response.status_code == 401:
                raise self.needs_credentials(response.status_code)
        if response.status_code == 403:
            raise self.needs_credentials(response.status_code)
        return response

    def authorize(self, response: requests.Response, *, scope: object = None) -> str:
        """The Authorization header value the 401 challenge asks for (never put in a message).

        `scope` (Bearer only) replaces the challenge's scope: "repository:<repo>:pull,push" for a push.
        """
        scheme, params = _parse_challenge(response.headers.get("WWW-Authenticate", ""))
        credentials = self.credentials
        if scheme == "basic":
            basic = credentials.basic() if credentials else None
            if not basic:
                raise self.needs_credentials(401)
            return "Basic " + base64.b64encode(":".join(basic).encode()).decode()
        if scheme != "bearer" or not params.get("realm"):
            raise EnvbuildError(
                f"registry {self.parsed.registry} asked for an authentication scheme envbuild does not "
                f"speak ({scheme or 'no WWW-Authenticate header'})",
                fix="pin the image by digest yourself (name:tag@sha256:...) or use a registry with "
                "Bearer-token or basic authentication",
            )
        self.check_realm(params["realm"])
        query = {"service": params.get("service"), "scope": scope or params.get("scope")}
        if not query["scope"] and self.parsed.repository:  # a login check (GET /v2/) asks for no scope
            query["scope"] = f"repository:{self.parsed.repository}:pull"
        query = {k: v for k, v in query.items() if v}
        if credentials and credentials.identity_token:  # OAuth2: the refresh token for an access token
            form = {**query, "grant_type": "refresh_token", "client_id": "envbuild"}
            form["refresh_token"] = credentials.identity_token
            token_response = self.request("POST", params["realm"], data=form)
        else:
            token_response = self.get(params["realm"], params=query, auth=credentials and credentials.basic())
        if token_response.status_code in (401, 403):
            raise self.needs_credentials(token_response.status_code)
        if token_response.status_code != 200:
            raise EnvbuildError(
                f"the token service of registry {self.parsed.registry} answered HTTP "
                f"{token_response.status_code} for {self.where}",
                fix="retry later; if it persists, check the registry's status",
            )
        answer = read_body(token_response, f"the token answer for {self.where}", limits.DOCUMENT_BYTES)
        try:
            body = parse_json(answer)
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise EnvbuildError(
                f"the token service of registry {self.parsed.registry} sent no token for {self.where}",
                fix="retry later; if it persists, check the registry's status",
            )
        return f"Bearer {token}"

    @property
    def origin(self) -> tuple[str, str, int] | None:
        """The registry's own (scheme, host, port)."""
        return _origin(f"{registry_scheme(self.parsed.api_host)}://{self.parsed.api_host}/")

    def is_registry(self, url: str) -> bool:
        """Whether `url` is on the registry's own scheme, host and port."""
        return _origin(url) == self.origin

    def check_realm(self, realm: str) -> None:
        """Refuse a token service that is neither https nor the registry itself: the token request
        carries the docker config's credentials, and its answer is a credential too."""
        origin = _origin(realm)
        if origin is not None and (origin[0] == "https" or origin == self.origin):
            return
        raise UsageError(
            f"registry {self.parsed.registry}'s Bearer challenge names the token realm "
            f"{redact(realm)!r}, which is neither https nor on the registry's own host and port "
            f"({self.parsed.api_host}): refusing to send it credentials or to ask it for a token",
            fix="a Bearer realm must be an https URL, or plain http on the registry's own host and "
            f"port; fix the token realm in {self.parsed.registry}'s auth configuration, or check "
            "that nothing between this machine and the registry rewrites its answers",
        )

    def needs_credentials(self, status: int) -> EnvbuildError:
        host = self.parsed.registry
        found = self.found[0] if self.found else None
        known = (
            f"the credentials from {found.source} were refused"
            if found
            else (f"no credentials for {host} in {docker_config_path(self.docker_config)}")
        )
        to = f" to {self.parsed.repository}" if self.parsed.repository else ""
        return EnvbuildError(
            f"registry {host} refused access{to} (HTTP {status}; {known}); "
            f"it needs credentials: docker login {host}",
            fix=f"run `docker login {host}` (or pass the docker config directory that has the login), "
            "and check the repository name and your access to it",
        )

    def not_found(
        self,
        response: requests.Response,
        tags_url: str,
        headers: dict[str, str],
        *,
        reference: str | None = None,
    ) -> NotFound:
        """Repository or tag not found: some registries (distribution 2.x) answer MANIFEST_UNKNOWN for
        both, so a 404 without NAME_UNKNOWN is told apart by asking for the repository's tag list.

        `reference`: the tag or "sha256:..." asked for (default: the parsed reference's tag). A NotFound,
        so a caller for whom a missing image is bad input (`envbuild audit`) can say so with exit 2."""
        codes = _error_codes(response)
        if "NAME_UNKNOWN" not in codes:
            try:
                probe = self.get(tags_url, headers={k: v for k, v in headers.items() if k != "Accept"})
            except EnvbuildError:
                probe = None
            if probe is not None and probe.status_code == 404:
                codes = _error_codes(probe)
        if "NAME_UNKNOWN" in codes:
            return NotFound(
                f"repository {self.parsed.repository} not found on registry {self.parsed.registry}",
                fix="check the image name's spelling and registry; a private repository may need "
                f"`docker login {self.parsed.registry}`",
            )
        if reference and DIGEST_RE.fullmatch(reference):
            return NotFound(
                f"manifest {reference} not found in {self.where}",
                fix="check the digest; the manifest may have been deleted, or pushed to another repository",
            )
        return NotFound(
            f"tag {reference or self.parsed.tag!r} not found in {self.where}",
            fix=f"check the tag's spelling, or list the tags with "
            f"GET /v2/{self.parsed.repository}/tags/list; push it first if it is your image",
        )

    def http_error(self, response: requests.Response, *, reference: str | None = None) -> EnvbuildError:
        codes = ", ".join(sorted(_error_codes(response)))
        reference = reference or self.parsed.tag
        at = "@" if DIGEST_RE.fullmatch(reference) else ":"
        return EnvbuildError(
            f"registry {self.parsed.registry} answered HTTP {response.status_code} for the manifest "
            f"of {self.where}{at}{reference}" + (f" ({codes})" if codes else ""),
            fix="retry later; if it persists, check the registry's status and the image reference",
        )


def _error_codes(response: requests.Response) -> set[str]:
    return {redact(str(e.get("code"))) for e in _errors(response) if isinstance(e, dict)}
