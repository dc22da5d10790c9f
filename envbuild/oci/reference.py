"""The OCI/Docker image-reference grammar, written once: parse, split a tag, name a registry host.

Docker's reference grammar (distribution/reference) decides what a valid NAME[:TAG][@DIGEST] is: spec
validation, render's --base-image, the registry client, promote and the lifecycle checks all parse
through `parse_reference`, so they agree on every edge (ports, IPv6 hosts, docker.io's library/).
"""

from __future__ import annotations

import re

from envbuild._util.record import Record
from envbuild.errors import UsageError

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
HUB_ALIASES = {DOCKER_HUB, "index.docker.io", DOCKER_HUB_API}

ACCEPTED_FORMS = (
    "accepted forms: NAME[:TAG][@sha256:DIGEST], where NAME is [REGISTRY[:PORT]/]PATH, e.g. "
    "'ubuntu:22.04', 'nvidia/cuda:12.4.1-runtime-ubuntu22.04', '127.0.0.1:5000/team/img:v1', "
    "'ghcr.io/acme/train@sha256:<64 hex digits>'"
)

# Docker's reference grammar (distribution/reference), kept to what parsing needs.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_DOMAIN_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(rf"(?:{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_NAME_MAX = 255


class Reference(Record):
    """A parsed image reference.

    name: the part before ":tag" / "@digest", exactly as written (used by `pinned`).
    registry: host[:port] as written, or "docker.io" when none is written.
    api_host: where the API lives (docker.io -> registry-1.docker.io).
    repository: the path inside the registry (docker.io single names get "library/").
    tag: the tag, "latest" when none is written. digest: "sha256:..." or None.
    """

    __slots__ = ("name", "registry", "api_host", "repository", "tag", "digest")
    name: str
    registry: str
    api_host: str
    repository: str
    tag: str
    digest: str | None


def parse_reference(ref: str) -> Reference:
    """Split an image reference by Docker's rules; a malformed one is a UsageError."""
    text = ref.strip() if isinstance(ref, str) else ""

    def bad(why: str) -> UsageError:
        return UsageError(f"malformed image reference {ref!r}: {why}", fix=ACCEPTED_FORMS)

    if not text:
        raise bad("it is empty")
    if any(c.isspace() for c in text):
        raise bad("it contains whitespace")
    remainder, at, digest = text.partition("@")
    if at:
        if not DIGEST_RE.fullmatch(digest):
            raise bad("the digest after '@' must be 'sha256:' followed by 64 lowercase hex digits")
    else:
        digest = None
    name, tag = remainder, None
    last_colon, last_slash = remainder.rfind(":"), remainder.rfind("/")
    if last_colon > last_slash:
        name, tag = remainder[:last_colon], remainder[last_colon + 1 :]
        if not TAG_RE.fullmatch(tag):
            raise bad(
                f"tag {tag!r} is not valid (up to 128 of letters, digits, '_', '.', '-'; "
                "not starting with '.' or '-')"
            )
    if not name:
        raise bad("the image name is missing")
    if len(name) > _NAME_MAX:
        raise bad(f"the name is longer than {_NAME_MAX} characters")

    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, path = first, rest
        if not _DOMAIN_RE.fullmatch(registry):
            raise bad(f"registry {registry!r} is not a valid host[:port]")
    else:
        registry, path = DOCKER_HUB, name
    if not path:
        raise bad("the repository path after the registry is missing")
    if not _PATH_RE.fullmatch(path):
        if path.lower() != path and _PATH_RE.fullmatch(path.lower()):
            raise bad(f"repository {path!r} must be lowercase")
        raise bad(
            f"repository {path!r} is not valid (lowercase components of letters and digits, "
            "separated by '.', '_', '__' or '-', joined by '/')"
        )

    if registry in HUB_ALIASES:
        api_host = DOCKER_HUB_API
        if "/" not in path:
            path = f"library/{path}"
    else:
        api_host = registry
    return Reference(
        name=name, registry=registry, api_host=api_host, repository=path, tag=tag or "latest", digest=digest
    )


def split_tag(ref: str) -> tuple[str, str]:
    """ "host:5000/team/img:v1" -> ("host:5000/team/img", "v1"); no tag -> "latest"."""
    colon, slash = ref.rfind(":"), ref.rfind("/")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :]
    return ref, "latest"


def registry_host(repository: str) -> str:
    """The registry a repository lives on: ghcr.io/acme/train -> ghcr.io; acme/train -> docker.io.

    The first path component is a host when it has a dot or a port, or is localhost: Docker's rule."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB
