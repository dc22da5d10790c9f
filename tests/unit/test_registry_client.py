"""The registry v2 client: reference parsing, the Bearer-token handshake against a real HTTP token
server on 127.0.0.1, and (marked docker) digests from Debian's docker-registry, anonymous and with
htpasswd basic auth, compared with what the registry and `docker push` report."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.reference import Reference, parse_reference
from envbuild.oci.registry import MANIFEST_ACCEPT, pinned, registry_scheme, resolve_digest
from tests.test_render_docker import bookworm_image, docker

DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER_DIGEST = "sha256:" + "f" * 64
REPO = "envbuild-test/bookworm"


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


class FakeRegistry:
    """A registry-shaped HTTP server: /v2/x/y/manifests/* needs a Bearer token from /token."""

    token_user = ("tokenuser", "s3cret-token-pass")

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []  # (path, Authorization, query)
        self.fail_first = 0  # answer 503 this many times first
        self.token_key = "token"
        self.digest_header = True
        self.body = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"}'
        self.require_login = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

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
                    return self.reply(200, outer.body, digest=DIGEST if outer.digest_header else None)
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

            def reply(
                self, status: int, body: bytes, challenge: str | None = None, digest: str | None = None
            ):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if challenge:
                    self.send_header("WWW-Authenticate", challenge)
                if digest:
                    self.send_header("Docker-Content-Digest", digest)
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def fake_registry() -> Iterator[FakeRegistry]:
    server = FakeRegistry()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def write_docker_config(directory: Path, host: str, user: str, password: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (directory / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return str(directory)


def test_bearer_token_flow_anonymous(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    ref = f"{fake_registry.host}/x/y:v1"
    assert resolve_digest(ref, docker_config=str(tmp_path)) == DIGEST
    paths = [(path, auth) for path, auth, _ in fake_registry.requests]
    assert paths == [
        ("/v2/x/y/manifests/v1", ""),
        ("/token", ""),
        ("/v2/x/y/manifests/v1", "Bearer anon-token"),
    ]
    assert pinned(ref, docker_config=str(tmp_path)) == f"{ref}@{DIGEST}"


def test_bearer_token_flow_with_docker_config_credentials(
    fake_registry: FakeRegistry, tmp_path: Path
) -> None:
    fake_registry.token_key = "access_token"
    fake_registry.require_login = True
    config = write_docker_config(tmp_path / "docker", fake_registry.host, *FakeRegistry.token_user)
    assert resolve_digest(f"{fake_registry.host}/x/y", docker_config=config) == DIGEST
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
    import hashlib

    fake_registry.digest_header = False
    expected = "sha256:" + hashlib.sha256(fake_registry.body).hexdigest()
    assert resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=str(tmp_path)) == expected


def test_5xx_is_retried_with_backoff_and_4xx_is_not(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.fail_first = 2
    started = time.monotonic()
    assert resolve_digest(f"{fake_registry.host}/x/y:v1", docker_config=str(tmp_path), retries=2) == DIGEST
    assert time.monotonic() - started >= 1.5  # slept 0.5 s, then 1 s
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


def test_unreachable_registry_is_named_quickly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"127.0.0.1:{port}/x/y:t", retries=1, timeout=5)
    assert time.monotonic() - started < 5
    assert f"registry 127.0.0.1:{port} is unreachable after 2 attempt(s)" in caught.value.message
    assert caught.value.fix


# --- Debian's docker-registry, for real (docker) ----------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(host: str, auth: tuple[str, str] | None = None) -> bool:
    try:
        return requests.get(f"http://{host}/v2/", timeout=2, auth=auth).status_code == 200
    except requests.RequestException:
        return False


def start_registry(directory: Path, extra_yaml: str = "") -> tuple[str, subprocess.Popen[bytes]]:
    host = f"127.0.0.1:{free_port()}"
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'storage'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: {host}\n" + extra_yaml
    )
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    for _ in range(100):
        try:
            requests.get(f"http://{host}/v2/", timeout=1)
            return host, process
        except requests.RequestException:
            if process.poll() is not None:
                break
            time.sleep(0.2)
    stop(process)
    pytest.fail(
        f"docker-registry did not start on {host}: {(directory / 'registry.log').read_text()[-2000:]}"
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def anonymous_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ENVBUILD_TEST_REGISTRY (CI), else one already answering on 127.0.0.1:5000, else our own."""
    host = os.environ.get("ENVBUILD_TEST_REGISTRY")
    if host:
        yield host
        return
    if answers("127.0.0.1:5000"):
        yield "127.0.0.1:5000"
        return
    host, process = start_registry(tmp_path_factory.mktemp("registry-anon"))
    yield host
    stop(process)


def push(tag: str, *config: str) -> None:
    pushed = docker(*config, "push", tag, check=False)
    assert pushed.returncode == 0, pushed.stdout[-2000:] + pushed.stderr[-2000:]


def manifest_digest(host: str, repo: str, tag: str, auth: tuple[str, str] | None = None) -> str:
    response = requests.get(
        f"http://{host}/v2/{repo}/manifests/{tag}", headers={"Accept": MANIFEST_ACCEPT}, auth=auth, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.headers["Docker-Content-Digest"]


def delete_manifest(host: str, repo: str, digest: str, auth: tuple[str, str] | None = None) -> None:
    with contextlib.suppress(requests.RequestException):
        requests.delete(f"http://{host}/v2/{repo}/manifests/{digest}", auth=auth, timeout=10)


@pytest.fixture(scope="module")
def pushed_anonymous(bookworm_image: str, anonymous_registry: str) -> Iterator[str]:
    tag = f"{anonymous_registry}/{REPO}:latest"
    docker("tag", bookworm_image, tag)
    try:
        push(tag)
        digest = manifest_digest(anonymous_registry, REPO, "latest")
        yield tag
        delete_manifest(anonymous_registry, REPO, digest)
    finally:
        docker("rmi", tag, check=False)


@pytest.mark.docker
def test_anonymous_registry_digest_matches_registry_and_docker(pushed_anonymous: str) -> None:
    host = pushed_anonymous.split("/", 1)[0]
    expected = manifest_digest(host, REPO, "latest")
    assert resolve_digest(pushed_anonymous) == expected
    repo_digests = json.loads(
        docker("image", "inspect", pushed_anonymous, "--format", "{{json .RepoDigests}}").stdout
    )
    assert f"{host}/{REPO}@{expected}" in repo_digests
    assert pinned(pushed_anonymous) == f"{pushed_anonymous}@{expected}"


@pytest.mark.docker
def test_missing_tag_and_missing_repository_are_told_apart(pushed_anonymous: str) -> None:
    host = pushed_anonymous.split("/", 1)[0]
    with pytest.raises(EnvbuildError) as tag_missing:
        resolve_digest(f"{host}/{REPO}:no-such-tag")
    assert tag_missing.value.message == f"tag 'no-such-tag' not found in {host}/{REPO}"
    with pytest.raises(EnvbuildError) as repo_missing:
        resolve_digest(f"{host}/envbuild-test/no-such-repo:latest")
    assert repo_missing.value.message == f"repository envbuild-test/no-such-repo not found on registry {host}"
    assert tag_missing.value.fix and repo_missing.value.fix


@pytest.mark.docker
def test_htpasswd_registry_needs_docker_login(
    bookworm_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bcrypt

    user, password = "envbuild", "pw-Kq83-not-in-messages"
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_bytes(user.encode() + b":" + bcrypt.hashpw(password.encode(), bcrypt.gensalt()) + b"\n")
    auth_yaml = f"auth:\n  htpasswd:\n    realm: envbuild-test\n    path: {htpasswd}\n"
    host, process = start_registry(tmp_path / "registry", auth_yaml)
    config = tmp_path / "docker-config"
    config.mkdir()
    tag = f"{host}/{REPO}:latest"
    try:
        login = docker(
            "--config",
            str(config),
            "login",
            host,
            "-u",
            user,
            "--password-stdin",
            input=password,
            check=False,
        )
        assert login.returncode == 0, login.stderr
        docker("tag", bookworm_image, tag)
        push(tag, "--config", str(config))
        expected = manifest_digest(host, REPO, "latest", auth=(user, password))

        assert resolve_digest(tag, docker_config=str(config)) == expected

        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))  # no ~/.docker either
        with pytest.raises(EnvbuildError) as caught:
            resolve_digest(tag)
        text = f"{caught.value.render()} {caught.value!r}"
        assert f"docker login {host}" in text
        assert password not in text

        wrong = write_docker_config(tmp_path / "wrong", host, user, "wrong-" + password)
        with pytest.raises(EnvbuildError) as refused:
            resolve_digest(tag, docker_config=wrong)
        text = f"{refused.value.render()} {refused.value!r}"
        assert "docker login" in text and password not in text
    finally:
        docker("rmi", tag, check=False)
        stop(process)


def test_name_unknown_is_a_missing_repository(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"{fake_registry.host}/other/repo:v1", docker_config=str(tmp_path))
    assert caught.value.message == f"repository other/repo not found on registry {fake_registry.host}"
    assert len(fake_registry.requests) == 1
