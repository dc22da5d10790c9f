"""A small client for the registry HTTP API v2: parse an image reference and pin a tag to its digest.

`resolve_digest("nvidia/cuda:12.4.1-runtime-ubuntu22.04")` asks the registry which manifest (or
manifest list / OCI index) the tag points at right now and returns its "sha256:..." digest;
`pinned(ref)` turns the reference into "name:tag@sha256:...", which always pulls the same bytes.

Authentication follows what `docker pull` does: anonymous first, then on a 401 the challenge in
WWW-Authenticate decides - a Bearer token from the realm it names (with the docker config's
credentials for that registry, when there are some), or HTTP basic with those credentials.
Credentials never appear in a message or an exception: no request header is ever quoted.

`requests` is imported inside the functions: importing this module costs nothing at start-up.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import time

from envbuild._record import Record
from envbuild.errors import EnvbuildError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import requests

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_HUB_ALIASES = {DOCKER_HUB, "index.docker.io", DOCKER_HUB_API}

MANIFEST_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)

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
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_NAME_MAX = 255

BACKOFF_START_S = 0.5


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
        if not _DIGEST_RE.fullmatch(digest):
            raise bad("the digest after '@' must be 'sha256:' followed by 64 lowercase hex digits")
    else:
        digest = None
    name, tag = remainder, None
    last_colon, last_slash = remainder.rfind(":"), remainder.rfind("/")
    if last_colon > last_slash:
        name, tag = remainder[:last_colon], remainder[last_colon + 1 :]
        if not _TAG_RE.fullmatch(tag):
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

    if registry in _HUB_ALIASES:
        api_host = DOCKER_HUB_API
        if "/" not in path:
            path = f"library/{path}"
    else:
        api_host = registry
    return Reference(name, registry, api_host, path, tag or "latest", digest)


def pinned(ref: str, **kwargs: object) -> str:
    """ "name:tag@sha256:..." for `ref`, keeping name and tag as written; a pinned ref is kept as is.

    Keyword arguments go to `resolve_digest` (docker_config, timeout, retries).
    """
    parsed = parse_reference(ref)
    if parsed.digest:
        return ref.strip()
    digest = resolve_digest(ref, **kwargs)  # type: ignore[arg-type]
    return f"{parsed.name}:{parsed.tag}@{digest}"


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

    header = response.headers.get("Docker-Content-Digest", "").strip()
    if _DIGEST_RE.fullmatch(header):
        return header
    return "sha256:" + hashlib.sha256(response.content).hexdigest()


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


def docker_config_path(docker_config: str | None = None) -> str:
    directory = (
        docker_config or os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    )
    return os.path.join(directory, "config.json")


def _credentials(parsed: Reference, docker_config: str | None) -> tuple[str, str] | None:
    """(user, password) from the docker config's `auths` for this registry, or None."""
    try:
        with open(docker_config_path(docker_config), encoding="utf-8") as handle:
            auths = json.load(handle).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(auths, dict):
        return None
    wanted = {parsed.registry.lower()}
    if parsed.registry in _HUB_ALIASES:
        wanted |= _HUB_ALIASES
    for key, entry in auths.items():
        if not isinstance(entry, dict) or _config_key_host(key) not in wanted:
            continue
        if entry.get("auth"):
            try:
                user, sep, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            if sep:
                return user, password
        if entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
    return None


def _config_key_host(key: str) -> str:
    """ "https://index.docker.io/v1/" -> "index.docker.io"; "127.0.0.1:5000" stays as it is."""
    host = key.strip().lower()
    for prefix in ("https://", "http://"):
        if host.startswith(prefix):
            host = host[len(prefix) :]
    return host.split("/", 1)[0]


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
        self.http = requests.Session()
        self.credentials = _credentials(parsed, docker_config)

    @property
    def where(self) -> str:
        return f"{self.parsed.registry}/{self.parsed.repository}"

    def get(self, url: str, **kwargs: object) -> requests.Response:
        import requests

        host = re.sub(r"^\w+://", "", url).split("/", 1)[0]
        delay = BACKOFF_START_S
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.http.get(url, timeout=self.timeout, **kwargs)  # type: ignore[arg-type]
            except requests.exceptions.SSLError as exc:
                raise EnvbuildError(
                    f"TLS handshake with registry {host} failed: {_reason(exc)}",
                    fix=f"if {host} serves plain http, list it in ENVBUILD_INSECURE_REGISTRIES "
                    f"(comma-separated host:port); otherwise check its certificate",
                ) from None
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                if last:
                    raise EnvbuildError(
                        f"registry {host} is unreachable after {attempt + 1} attempt(s): {_reason(exc)}",
                        fix=f"check that {host} is the right host and port, that it is running and "
                        "that this machine can reach it (network, proxy, firewall)",
                    ) from None
            else:
                if response.status_code < 500 or last:
                    return response
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def authorize(self, response: requests.Response) -> str:
        """The Authorization header value the 401 challenge asks for (never put in a message)."""
        scheme, params = _parse_challenge(response.headers.get("WWW-Authenticate", ""))
        if scheme == "basic":
            if not self.credentials:
                raise self.needs_credentials(401)
            return "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
        if scheme != "bearer" or not params.get("realm"):
            raise EnvbuildError(
                f"registry {self.parsed.registry} asked for an authentication scheme envbuild does not "
                f"speak ({scheme or 'no WWW-Authenticate header'})",
                fix="pin the image by digest yourself (name:tag@sha256:...) or use a registry with "
                "Bearer-token or basic authentication",
            )
        query = {"service": params.get("service"), "scope": params.get("scope")}
        if not query["scope"]:
            query["scope"] = f"repository:{self.parsed.repository}:pull"
        token_response = self.get(
            params["realm"],
            params={k: v for k, v in query.items() if v},
            auth=self.credentials,
        )
        if token_response.status_code in (401, 403):
            raise self.needs_credentials(token_response.status_code)
        if token_response.status_code != 200:
            raise EnvbuildError(
                f"the token service of registry {self.parsed.registry} answered HTTP "
                f"{token_response.status_code} for {self.where}",
                fix="retry later; if it persists, check the registry's status",
            )
        try:
            body = token_response.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise EnvbuildError(
                f"the token service of registry {self.parsed.registry} sent no token for {self.where}",
                fix="retry later; if it persists, check the registry's status",
            )
        return f"Bearer {token}"

    def needs_credentials(self, status: int) -> EnvbuildError:
        host = self.parsed.registry
        known = (
            "the credentials in the docker config were refused"
            if self.credentials
            else (f"no credentials for {host} in {docker_config_path(self.docker_config)}")
        )
        return EnvbuildError(
            f"registry {host} refused access to {self.parsed.repository} (HTTP {status}; {known}); "
            f"it needs credentials: docker login {host}",
            fix=f"run `docker login {host}` (or pass the docker config directory that has the login), "
            "and check the repository name and your access to it",
        )

    def not_found(self, response: requests.Response, tags_url: str, headers: dict[str, str]) -> EnvbuildError:
        """Repository or tag not found: some registries (distribution 2.x) answer MANIFEST_UNKNOWN for
        both, so a 404 without NAME_UNKNOWN is told apart by asking for the repository's tag list."""
        codes = _error_codes(response)
        if "NAME_UNKNOWN" not in codes:
            try:
                probe = self.get(tags_url, headers={k: v for k, v in headers.items() if k != "Accept"})
            except EnvbuildError:
                probe = None
            if probe is not None and probe.status_code == 404:
                codes = _error_codes(probe)
        if "NAME_UNKNOWN" in codes:
            return EnvbuildError(
                f"repository {self.parsed.repository} not found on registry {self.parsed.registry}",
                fix="check the image name's spelling and registry; a private repository may need "
                f"`docker login {self.parsed.registry}`",
            )
        return EnvbuildError(
            f"tag {self.parsed.tag!r} not found in {self.where}",
            fix=f"check the tag's spelling, or list the tags with "
            f"GET /v2/{self.parsed.repository}/tags/list; push it first if it is your image",
        )

    def http_error(self, response: requests.Response) -> EnvbuildError:
        codes = ", ".join(sorted(_error_codes(response)))
        return EnvbuildError(
            f"registry {self.parsed.registry} answered HTTP {response.status_code} for the manifest "
            f"of {self.where}:{self.parsed.tag}" + (f" ({codes})" if codes else ""),
            fix="retry later; if it persists, check the registry's status and the image reference",
        )


def _error_codes(response: requests.Response) -> set[str]:
    try:
        errors = response.json().get("errors") or []
        return {str(e.get("code")) for e in errors if isinstance(e, dict)}
    except (ValueError, AttributeError):
        return set()


def _reason(exc: BaseException) -> str:
    """A short cause: the innermost message, which names the host and port but no header."""
    text = str(exc)
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if match:
        return match.group(1).strip()
    return type(exc).__name__ if len(text) > 200 else text
