"""The registry v2 client: reference parsing, the Bearer-token handshake against a real HTTP token
server on 127.0.0.1, and (marked docker) digests from Debian's docker-registry, anonymous and with
htpasswd basic auth, compared with what the registry and `docker push` report."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.reference import Reference, parse_reference, registry_host
from envbuild.oci.registry import MANIFEST_ACCEPT, pinned, registry_scheme, resolve_digest
from tests.helpers.registry import LoopbackServer, RegistryHandler, write_docker_config

DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER_DIGEST = "sha256:" + "f" * 64
INDEX_BODY = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"}'
INDEX_DIGEST = "sha256:" + hashlib.sha256(INDEX_BODY).hexdigest()  # what the fake registry serves


# --- parse_reference ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (
            "ubuntu:22.04",
            Reference(
                name="ubuntu",
                registry="docker.io",
                api_host="registry-1.docker.io",
                repository="library/ubuntu",
                tag="22.04",
                digest=None,
            ),
        ),
        (
            "ubuntu",
            Reference(
                name="ubuntu",
                registry="docker.io",
                api_host="registry-1.docker.io",
                repository="library/ubuntu",
                tag="latest",
                digest=None,
            ),
        ),
        (
            "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
            Reference(
                name="nvidia/cuda",
                registry="docker.io",
                api_host="registry-1.docker.io",
                repository="nvidia/cuda",
                tag="12.4.1-cudnn-runtime-ubuntu22.04",
                digest=None,
            ),
        ),
        (
            "docker.io/library/python:3.11",
            Reference(
                name="docker.io/library/python",
                registry="docker.io",
                api_host="registry-1.docker.io",
                repository="library/python",
                tag="3.11",
                digest=None,
            ),
        ),
        (
            "127.0.0.1:5000/a/b:t",
            Reference(
                name="127.0.0.1:5000/a/b",
                registry="127.0.0.1:5000",
                api_host="127.0.0.1:5000",
                repository="a/b",
                tag="t",
                digest=None,
            ),
        ),
        (
            "localhost/x",
            Reference(
                name="localhost/x",
                registry="localhost",
                api_host="localhost",
                repository="x",
                tag="latest",
                digest=None,
            ),
        ),
        (
            f"ghcr.io/acme/train@{DIGEST}",
            Reference(
                name="ghcr.io/acme/train",
                registry="ghcr.io",
                api_host="ghcr.io",
                repository="acme/train",
                tag="latest",
                digest=DIGEST,
            ),
        ),
        (
            f"ghcr.io/acme/train:v2@{DIGEST}",
            Reference(
                name="ghcr.io/acme/train",
                registry="ghcr.io",
                api_host="ghcr.io",
                repository="acme/train",
                tag="v2",
                digest=DIGEST,
            ),
        ),
        # no ".", ":" or "localhost" in the first component: a Docker Hub namespace, not a host
        (
            "acme/train:v1",
            Reference(
                name="acme/train",
                registry="docker.io",
                api_host="registry-1.docker.io",
                repository="acme/train",
                tag="v1",
                digest=None,
            ),
        ),
        (
            "[::1]:5000/x:y",
            Reference(
                name="[::1]:5000/x",
                registry="[::1]:5000",
                api_host="[::1]:5000",
                repository="x",
                tag="y",
                digest=None,
            ),
        ),
    ],
)
def test_parse_reference(ref: str, expected: Reference) -> None:
    assert parse_reference(ref) == expected


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("", "empty"),
        ("ubuntu:", "tag"),
        (":22.04", "name is missing"),
        ("Ubuntu:22.04", "lowercase"),
        ("acme//train", "not valid"),
        ("ubuntu:22.04 extra", "whitespace"),
        ("ubuntu@sha256:abc", "64 lowercase hex"),
        (f"ubuntu@md5:{'a' * 32}", "sha256"),
        ("ubuntu:-bad", "tag"),
        ("ghcr.io/", "repository path"),
        ("-acme/train", "not valid"),
        ("bad_host!:5000/x", "not a valid host[:port]"),
    ],
)
def test_parse_reference_rejects_malformed(ref: str, why: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_reference(ref)
    assert repr(ref) in caught.value.message and why in caught.value.message
    assert "NAME[:TAG][@sha256:DIGEST]" in (caught.value.fix or "")


def test_registry_host():
    assert registry_host("ghcr.io/acme/train") == "ghcr.io"
    assert registry_host("localhost:5000/train") == "localhost:5000"
    assert registry_host("acme/train") == "docker.io"
    assert registry_host("train") == "docker.io"


def test_pinned_with_a_digest_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(requests.Session, "request", no_network)
    ref = f"nvidia/cuda:12.4.1-runtime-ubuntu22.04@{DIGEST}"
    assert pinned(ref) == ref
    assert pinned(f"ghcr.io/acme/train@{DIGEST}") == f"ghcr.io/acme/train@{DIGEST}"
    assert resolve_digest(ref) == DIGEST


def test_scheme_is_http_only_for_loopback_and_listed_insecure_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVBUILD_INSECURE_REGISTRIES", raising=False)
    for host in ("127.0.0.1:5000", "127.3.4.5", "localhost:5000", "localhost", "[::1]:5000"):
        assert registry_scheme(host) == "http", host
    for host in ("registry-1.docker.io", "ghcr.io", "10.0.0.5:5000", "localhost.example.com"):
        assert registry_scheme(host) == "https", host
    monkeypatch.setenv("ENVBUILD_INSECURE_REGISTRIES", "10.0.0.5:5000, reg.lan:80")
    assert registry_scheme("10.0.0.5:5000") == "http"
    assert registry_scheme("reg.lan:80") == "http"
    assert registry_scheme("10.0.0.5:5001") == "https"


def test_requests_is_not_imported_at_module_import() -> None:
    code = "import sys, envbuild.oci.registry; print('requests' in sys.modules)"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"


# --- a real HTTP token server (not a mock of requests) ----------------------------------------------


class FakeRegistry(LoopbackServer):
    """A registry-shaped HTTP server: /v2/x/y/manifests/* needs a Bearer token from /token."""

    token_user = ("tokenuser", "s3cret-token-pass")

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []  # (path, Authorization, query)
        self.fail_first = 0  # answer 503 this many times first
        self.token_key = "token"
        self.digest_header = True
        self.body = INDEX_BODY
        self.require_login = False
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                auth = self.headers.get("Authorization", "")
                outer.requests.append((path, auth, query))
                if outer.fail_first:
                    outer.fail_first -= 1
                    return self.reply(503, b"busy")
                if path == "/token":
                    return self.token(auth, query)
                if path == "/v2/x/y/tags/list":
                    return self.reply(200, b'{"name": "x/y", "tags": ["v1"]}')
                if path == "/v2/x/y/manifests/missing":
                    return self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN"}]}')
                if path.startswith("/v2/x/y/manifests/"):
                    if auth not in ("Bearer anon-token", "Bearer user-token"):
                        realm = f"http://127.0.0.1:{outer.port}/token"
                        challenge = f'Bearer realm="{realm}",service="test",scope="repository:x/y:pull"'
                        return self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', challenge)
                    assert self.headers.get("Accept") == MANIFEST_ACCEPT
                    return self.reply(200, outer.body, digest=INDEX_DIGEST if outer.digest_header else None)
                return self.reply(404, b'{"errors": [{"code": "NAME_UNKNOWN"}]}')

            def token(self, auth: str, query: str) -> None:
                if query != "service=test&scope=repository%3Ax%2Fy%3Apull":
                    return self.reply(400, b"bad query")
                basic = "Basic " + base64.b64encode(":".join(outer.token_user).encode()).decode()
                if auth == basic:
                    token = "user-token"
                elif auth or outer.require_login:
                    return self.reply(401, b'{"details": "incorrect username or password"}')
                else:
                    token = "anon-token"
                self.reply(200, json.dumps({outer.token_key: token}).encode())

        super().__init__(Handler)


@pytest.fixture
def fake_registry() -> Iterator[FakeRegistry]:
    with FakeRegistry() as server:
        yield server


def test_bearer_token_flow_anonymous(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    ref = f"{fake_registry.host}/x/y:v1"
    assert resolve_digest(ref, docker_config=str(tmp_path)) == INDEX_DIGEST
    paths = [(path, auth) for path, auth, _ in fake_registry.requests]
    assert paths == [
        ("/v2/x/y/manifests/v1", ""),
        ("/token", ""),
        ("/v2/x/y/manifests/v1", "Bearer anon-token"),
    ]
    assert pinned(ref, docker_config=str(tmp_path)) == f"{ref}@{INDEX_DIGEST}"


def test_bearer_token_flow_with_docker_config_credentials(
    fake_registry: FakeRegistry, tmp_path: Path
) -> None:
    fake_registry.token_key = "access_token"
    fake_registry.require_login = True
    config = write_docker_config(tmp_path / "docker", fake_registry.host, *FakeRegistry.token_user)
    assert resolve_digest(f"{fake_registry.host}/x/y", docker_config=config) == INDEX_DIGEST
    assert fake_registry.requests[-1][:2] == ("/v2/x/y/manifests/latest", "Bearer user-token")


def test_bearer_token_refused_names_docker_login_not_the_password(
    fake_registry: FakeRegistry, tmp_path: Path
) -> None:
    config = write_docker_config(tmp_path / "docker", fake_registry.host, "tokenuser", "wrong-pass-XYZ")
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=config)
    text = f"{caught.value.render()} {caught.value!r}"
    assert f"docker login {fake_registry.host}" in text
    assert "wrong-pass-XYZ" not in text
    assert base64.b64encode(b"tokenuser:wrong-pass-XYZ").decode() not in text


def test_digest_falls_back_to_sha256_of_the_body(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.digest_header = False
    expected = "sha256:" + hashlib.sha256(fake_registry.body).hexdigest()
    assert resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=str(tmp_path)) == expected


def test_5xx_is_retried_with_backoff_and_4xx_is_not(
    fake_registry: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    monkeypatch.setattr("envbuild._util.http.time.sleep", waits.append)
    fake_registry.fail_first = 2
    assert (
        resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=str(tmp_path), retries=2) == INDEX_DIGEST
    )
    assert waits == [0.5, 1.0]  # the one retry policy: doubling waits from BACKOFF_START_S
    fake_registry.requests.clear()
    with pytest.raises(EnvbuildError, match="tag 'missing' not found"):
        resolve_digest(f"{fake_registry.host}/x/y:missing", docker_config=str(tmp_path), retries=3)
    # one manifest request, not retried; then the tag list tells "tag missing" from "repository missing"
    assert [path for path, _, _ in fake_registry.requests] == [
        "/v2/x/y/manifests/missing",
        "/v2/x/y/tags/list",
    ]
    fake_registry.fail_first = 5
    with pytest.raises(EnvbuildError, match="answered HTTP 503"):
        resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=str(tmp_path), retries=1)


def test_unreachable_registry_is_named_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("envbuild._util.http.time.sleep", waits.append)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"127.0.0.1:{port}/x/y:t", retries=1, timeout=5)
    assert waits == [0.5]  # refused at once and retried once, not timed out
    assert f"registry 127.0.0.1:{port} is unreachable after 2 attempt(s)" in caught.value.message
    assert caught.value.fix


# --- Debian's docker-registry, for real (docker) ----------------------------------------------------


def test_name_unknown_is_a_missing_repository(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"{fake_registry.host}/other/repo:v1", docker_config=str(tmp_path))
    assert caught.value.message == f"repository other/repo not found on registry {fake_registry.host}"
    assert len(fake_registry.requests) == 1
