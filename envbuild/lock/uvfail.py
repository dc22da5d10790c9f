"""Why uv failed, read from its stderr, and the error envbuild ends `lock` with.

uv exits non-zero both when the requirements conflict and when it never got an answer from an
index. The two need opposite fixes: relaxing pins does nothing for a DNS failure, and checking the
network does nothing for a conflict. So the cause is read from uv's own words, and the error says
which it was, with the URL uv could not fetch.

The patterns below are uv's real stderr, kept as fixtures in tests/fixtures/uv/ (captured from uv
0.13 against loopback servers, one per cause):

- `Failed to fetch: URL` with a transport cause: `Connection refused`, `dns error`, `operation timed
  out`, `tunnel error` (an HTTPS proxy that cannot be reached), `Connection reset`;
- `Failed to fetch: URL` with a TLS cause: `invalid peer certificate: ...`, `received corrupt
  message` (https:// to a plain-http server), a handshake failure;
- `Failed to fetch: URL` with `HTTP status server error (503 Service Unavailable)` (any 5xx), or
  a client error status (a 404 for a file the index links to);
- `No solution found` with a `hint:` that an index answered 401 or 403: the credentials;
- `No solution found` with `the network was disabled`: UV_OFFLINE and a cache without the package;
- `No solution found` with none of those: a real conflict, the only case where pins are the fix.

An index URL may carry credentials in the user's environment; every URL and line of uv's that an
error repeats goes through `redact` first.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from envbuild.errors import EnvbuildError

NETWORK_KINDS = ("unreachable", "tls", "http")


class Cause(NamedTuple):
    """What uv's stderr says went wrong. kind: one of NETWORK_KINDS, "auth", "offline", "conflict",
    or "other" (none of the patterns: uv's lines are shown as they are)."""

    kind: str
    url: str | None  # the URL uv could not fetch (or, for "auth", the index its hint names)
    reason: str  # a few words: "connection refused", "HTTP 503 Service Unavailable"


_FETCH = re.compile(r"Failed to fetch: (\S+)")
_STATUS = re.compile(r"HTTP status (server|client) error \((\d{3})\s*([^)]*)\)")
_AUTH = re.compile(
    r"hint: An index(?: URL)? \((\S+)\) (?:could not be queried due to a lack of valid authentication "
    r"credentials \((\d{3}[^)]*)\)|returned a (\d{3} [A-Za-z ]+?) error)"
)
_TRANSPORT = (  # (pattern in a cause line, the reason said): the first that matches wins
    (re.compile(r"tunnel error"), "the proxy could not be reached"),
    (re.compile(r"(?i)connection refused"), "connection refused"),
    (re.compile(r"(?i)dns error|failed to lookup address|name or service not known"), "DNS lookup failed"),
    (re.compile(r"(?i)timed out"), "timed out"),
    (re.compile(r"(?i)connection reset"), "connection reset"),
    (re.compile(r"(?i)network is unreachable|no route to host"), "network unreachable"),
)
_TLS = re.compile(r"(?i)invalid peer certificate|certificate|corrupt message|handshake|\btls\b|\bssl\b")


def read_cause(stderr: str) -> Cause:
    """The cause of a failed `uv pip compile`, from its stderr alone."""
    if "because the network was disabled" in stderr:
        return Cause("offline", None, "the network is disabled and uv's cache lacks a package")
    auth = _AUTH.search(stderr)
    if auth:
        return Cause("auth", auth.group(1), (auth.group(2) or auth.group(3)).strip())
    fetch = _FETCH.search(stderr)
    if fetch:
        url = fetch.group(1).rstrip(".,:")
        causes = stderr[fetch.end() :]
        status = _STATUS.search(causes)
        if status:
            return Cause("http", url, f"HTTP {status.group(2)} {status.group(3).strip()}".rstrip())
        for pattern, reason in _TRANSPORT:
            if pattern.search(causes):
                return Cause("unreachable", url, reason)
        tls = _TLS.search(causes)
        if tls:
            certificate = re.search(r"invalid peer certificate: ([^\n]+)", causes)
            if certificate:
                return Cause("tls", url, f"TLS: certificate not trusted, {certificate.group(1).strip()}")
            return Cause("tls", url, f"TLS handshake failed: {_last_cause(causes)}")
        return Cause("unreachable", url, _last_cause(causes) or "no answer")
    if "No solution found" in stderr:
        return Cause("conflict", None, "no set of versions satisfies the requirements")
    return Cause("other", None, _last_cause(stderr) or "uv failed")


def _last_cause(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line[len("cause: ") :] for line in lines if line.startswith("cause: ")]
    return (causes or lines or [""])[-1]


def _index_of(url: str, indexes: tuple[str, ...]) -> str | None:
    """The configured index `url` lies under (uv fetches `<index>/<project>/`), if any."""
    for index in indexes:
        if url.rstrip("/").startswith(index.rstrip("/")):
            return index
    return None


def _proxy_note(url: str) -> str:
    """ "; through the proxy P (HTTPS_PROXY)" when the environment sends `url` through a proxy (uv
    reads the same variables), since a proxy that is down fails exactly like the index being down."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not parts.hostname:
        return ""
    if urllib.request.proxy_bypass_environment(parts.hostname, proxies):
        return ""
    names = (f"{parts.scheme}_proxy", "all_proxy")
    variable = next(
        (v for n in names for v in (n, n.upper()) if os.environ.get(v)), f"{parts.scheme.upper()}_PROXY"
    )
    return f"; the request went through the proxy {proxy} ({variable})"


def _uv_said(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()][-12:]
    return "\n    ".join(lines)


_MIRROR = (
    "set index-url (framework-index-url for the framework layer) in the spec's [packages] to a "
    "mirror you can reach"
)
_FIXES = {
    "unreachable": "check the network, and the proxy variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) if "
    f"you use a proxy; or {_MIRROR}; with uv's cache already holding the packages, UV_OFFLINE=1 locks "
    "without the network",
    "http": f"the index answered with an error of its own: retry later, check the URL, or {_MIRROR}",
    "tls": "if the index uses a private certificate authority, give uv its certificate with "
    "SSL_CERT_FILE=/path/to/ca.pem, or UV_NATIVE_TLS=1 to trust the system's store; check the URL's "
    "scheme (https:// to a plain-http server fails this way)",
    "auth": "give uv credentials for this index in ~/.netrc or a keyring (UV_KEYRING_PROVIDER="
    "subprocess); a URL in the spec may not carry a password",
    "offline": "unset UV_OFFLINE to lock with the network, or lock once online first to fill uv's cache "
    "(UV_CACHE_DIR)",
    "conflict": "relax the pins named above, or check the index is reachable",
    "other": "read uv's message above; run `envbuild lock` again once its cause is fixed",
}


def uv_failure(
    stderr: str,
    *,
    during: str,
    indexes: tuple[str, ...],
    requirements: tuple[str, ...],
    conflict_fix: str | None = None,
) -> EnvbuildError:
    """The error for a failed uv run (exit 1): what failed, during what (`during`: "locking target
    default, framework layer"), uv's own last lines, and the fix for that cause only. `indexes`: the index
    URLs the run was given, so a failed page is reported as its index. `conflict_fix`: the fix for a
    conflict where relaxing pins is not it (an export of pins the lock already holds)."""
    from envbuild._util.redact import redact

    cause = read_cause(stderr)
    said = redact(_uv_said(stderr))
    if cause.kind in NETWORK_KINDS and cause.url:
        index = _index_of(cause.url, indexes)
        what = f"the package index {index}" if index else cause.url
        message = f"could not reach {what} ({cause.reason}{_proxy_note(cause.url)}) while {during}"
    elif cause.kind == "auth":
        message = f"the package index {cause.url} refused the credentials ({cause.reason}) while {during}"
    elif cause.kind == "offline":
        message = f"uv is offline and its cache lacks a package needed while {during}"
    elif cause.kind == "conflict":
        message = f"the resolver found no set of versions for {', '.join(requirements)} while {during}"
    else:
        message = f"uv failed while {during}"
    fix = conflict_fix if cause.kind == "conflict" and conflict_fix else _FIXES[cause.kind]
    return EnvbuildError(redact(f"{message}:\n    {said}"), fix=fix)
