"""Registry-side promotion: `promote_by_digest` puts a verified image's exact manifest bytes under new
tags of the same registry, with no layer pulled or pushed. Against Debian's docker-registry (marked
docker) with images built FROM the local bookworm base; and the PUT's Bearer scope against a real HTTP
token server on 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.registry import (
    fetch_manifest,
    image_config_labels,
    promote_by_digest,
    put_manifest,
    resolve_digest,
)
from tests.test_registry import anonymous_registry, delete_manifest, manifest_digest, push
from tests.test_render_docker import BASE_IMAGE, bookworm_image, docker

SRC = "envbuild-test/promote-src"
DST = "envbuild-test/promote-dst"
MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
NOT_VERIFIED = "was not verified by envbuild (no io.envbuild.verified label): refusing to promote"


# --- the PUT's auth against a real HTTP token server (no mock of requests) -------------------------


class PushRegistry:
    """/v2/x/y/manifests/<tag> takes a PUT only with a token issued for scope repository:x/y:pull,push;
    its 401 challenge names only "pull", so the client must ask for the push scope itself."""

    def __init__(self) -> None:
        self.token_queries: list[str] = []
        self.puts: list[tuple[str, str, bytes]] = []  # (path, Content-Type, body)
        self.refuse_token = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path != "/token":
                    return self.reply(404, b'{"errors": [{"code": "NAME_UNKNOWN"}]}')
                outer.token_queries.append(query)
                if outer.refuse_token:
                    return self.reply(401, b'{"details": "incorrect username or password"}')
                token = "push-token" if "scope=repository%3Ax%2Fy%3Apull%2Cpush" in query else "pull-token"
                self.reply(200, json.dumps({"token": token}).encode())

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Authorization") != "Bearer push-token":
                    realm = f"http://127.0.0.1:{outer.port}/token"
                    challenge = f'Bearer realm="{realm}",service="test",scope="repository:x/y:pull"'
                    return self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', challenge)
                outer.puts.append((self.path, self.headers.get("Content-Type", ""), body))
                if self.path.endswith("/bad"):
                    error = {"code": "MANIFEST_INVALID", "message": "manifest invalid", "detail": {}}
                    return self.reply(400, json.dumps({"errors": [error]}).encode())
                digest = "sha256:" + hashlib.sha256(body).hexdigest()
                self.reply(201, b"", digest=digest)

            def reply(
                self, status: int, body: bytes, challenge: str | None = None, digest: str | None = None
            ) -> None:
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
        self.host = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def push_registry() -> Iterator[PushRegistry]:
    server = PushRegistry()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_put_manifest_asks_for_the_push_scope_and_sends_the_exact_bytes(
    push_registry: PushRegistry, tmp_path: Path
) -> None:
    body = b'{"schemaVersion":2,  "odd spacing": true}\n'
    media_type = "application/vnd.oci.image.manifest.v1+json"
    digest = put_manifest(f"{push_registry.host}/x/y:v1", body, media_type, docker_config=str(tmp_path))
    assert digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert push_registry.token_queries == ["service=test&scope=repository%3Ax%2Fy%3Apull%2Cpush"]
    assert push_registry.puts == [("/v2/x/y/manifests/v1", media_type, body)]


def test_put_manifest_errors_name_the_registry_code_and_docker_login(
    push_registry: PushRegistry, tmp_path: Path
) -> None:
    with pytest.raises(EnvbuildError) as invalid:
        put_manifest(f"{push_registry.host}/x/y:bad", b"{}", "application/json", docker_config=str(tmp_path))
    assert "HTTP 400" in invalid.value.message
    assert "MANIFEST_INVALID: manifest invalid" in invalid.value.message
    assert invalid.value.fix

    push_registry.refuse_token = True
    with pytest.raises(EnvbuildError) as refused:
        put_manifest(f"{push_registry.host}/x/y:v1", b"{}", "application/json", docker_config=str(tmp_path))
    assert f"docker login {push_registry.host}" in refused.value.render()


def test_promote_by_digest_needs_a_digest_before_any_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(requests.Session, "request", no_network)
    with pytest.raises(UsageError, match="pinned by digest"):
        promote_by_digest("127.0.0.1:5000/envbuild-test/promote-src:candidate", ["final"])
    digest = "sha256:" + "a" * 64
    with pytest.raises(UsageError, match=re.escape("registry 127.0.0.2:5000")):
        promote_by_digest(f"127.0.0.1:5000/a/b@{digest}", ["127.0.0.2:5000/a/b:v1"])
    with pytest.raises(UsageError, match="is not a valid tag"):
        promote_by_digest(f"127.0.0.1:5000/a/b@{digest}", ["-bad"])


# --- Debian's docker-registry, for real (docker) ----------------------------------------------------


@dataclass
class Pushed:
    registry: str
    verified: str  # "<registry>/<SRC>:candidate"
    verified_digest: str
    unverified: str
    unverified_digest: str
    manifests: list[tuple[str, str]] = field(default_factory=list)  # (repo, digest) to delete


def build_and_push(directory: Path, tag: str, labels: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nLABEL {labels}\n")
    docker("build", "-q", "-t", tag, str(directory))
    push(tag)
    registry, _, rest = tag.partition("/")
    repo, _, name = rest.rpartition(":")
    return manifest_digest(registry, repo, name)


@pytest.fixture(scope="module")
def pushed(
    bookworm_image: str, anonymous_registry: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pushed]:
    run = uuid.uuid4().hex[:12]  # a fresh config, hence a fresh digest, per run
    verified = f"{anonymous_registry}/{SRC}:candidate"
    unverified = f"{anonymous_registry}/{SRC}:unverified"
    directory = tmp_path_factory.mktemp("promote")
    manifests: list[tuple[str, str]] = []
    try:
        verified_digest = build_and_push(
            directory / "verified",
            verified,
            f'io.envbuild.verified="true" io.envbuild.smoke.device="cpu" io.envbuild.test.run="{run}"',
        )
        manifests.append((SRC, verified_digest))
        unverified_digest = build_and_push(
            directory / "unverified", unverified, f'io.envbuild.test.run="{run}-unverified"'
        )
        manifests.append((SRC, unverified_digest))
        yield Pushed(anonymous_registry, verified, verified_digest, unverified, unverified_digest, manifests)
    finally:
        for repo, digest in reversed(manifests):
            delete_manifest(anonymous_registry, repo, digest)
        docker("rmi", verified, unverified, check=False)


def tags_list(registry: str, repo: str) -> list[str]:
    response = requests.get(f"http://{registry}/v2/{repo}/tags/list", timeout=10)
    assert response.status_code == 200, response.text
    return response.json().get("tags") or []


@pytest.mark.docker
def test_fetch_manifest_and_config_labels(pushed: Pushed) -> None:
    body, media_type, digest = fetch_manifest(pushed.verified)
    assert digest == pushed.verified_digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert media_type == json.loads(body)["mediaType"]
    assert fetch_manifest(f"{pushed.registry}/{SRC}@{digest}") == (body, media_type, digest)

    labels = image_config_labels(f"{pushed.registry}/{SRC}@{digest}")
    assert labels["io.envbuild.verified"] == "true"
    assert labels["io.envbuild.smoke.device"] == "cpu"
    assert "io.envbuild.verified" not in image_config_labels(pushed.unverified)

    with pytest.raises(EnvbuildError) as missing:
        fetch_manifest(f"{pushed.registry}/{SRC}@sha256:{'0' * 64}")
    assert missing.value.message == f"manifest sha256:{'0' * 64} not found in {pushed.registry}/{SRC}"


@pytest.mark.docker
def test_promote_by_digest_tags_the_same_manifest(pushed: Pushed) -> None:
    registry, digest = pushed.registry, pushed.verified_digest
    source = f"{registry}/{SRC}@{digest}"
    promoted = promote_by_digest(source, ["final", f"{registry}/{SRC}:v1"])

    assert promoted == [(f"{registry}/{SRC}:final", digest), (f"{registry}/{SRC}:v1", digest)]
    assert resolve_digest(f"{registry}/{SRC}:final") == digest
    assert resolve_digest(f"{registry}/{SRC}:v1") == digest
    assert {"candidate", "final", "v1"} <= set(tags_list(registry, SRC))
    # byte for byte the pushed manifest
    assert fetch_manifest(f"{registry}/{SRC}:v1")[0] == fetch_manifest(source)[0]


@pytest.mark.docker
def test_promote_into_another_repository_mounts_the_blobs(pushed: Pushed) -> None:
    registry, digest = pushed.registry, pushed.verified_digest
    pushed.manifests.append((DST, digest))
    promoted = promote_by_digest(f"{registry}/{SRC}@{digest}", [f"{registry}/{DST}:v1"])
    assert promoted == [(f"{registry}/{DST}:v1", digest)]
    assert resolve_digest(f"{registry}/{DST}:v1") == digest
    assert image_config_labels(f"{registry}/{DST}:v1")["io.envbuild.verified"] == "true"


@pytest.mark.docker
def test_promote_an_index_reads_the_amd64_labels(pushed: Pushed) -> None:
    registry = pushed.registry
    child, child_type, child_digest = fetch_manifest(pushed.verified)
    index = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_LIST,
        "manifests": [
            {
                "mediaType": child_type,
                "digest": pushed.unverified_digest,
                "size": len(fetch_manifest(pushed.unverified)[0]),
                "platform": {"architecture": "arm64", "os": "linux"},
            },
            {
                "mediaType": child_type,
                "digest": child_digest,
                "size": len(child),
                "platform": {"architecture": "amd64", "os": "linux"},
            },
        ],
    }
    body = json.dumps(index, indent=3).encode()
    index_digest = put_manifest(f"{registry}/{SRC}:index", body, MANIFEST_LIST)
    pushed.manifests.append((SRC, index_digest))
    assert index_digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert fetch_manifest(f"{registry}/{SRC}:index") == (body, MANIFEST_LIST, index_digest)
    assert image_config_labels(f"{registry}/{SRC}:index")["io.envbuild.verified"] == "true"

    pushed.manifests += [(DST, pushed.unverified_digest), (DST, child_digest), (DST, index_digest)]
    promoted = promote_by_digest(
        f"{registry}/{SRC}@{index_digest}", ["index-final", f"{registry}/{DST}:index"]
    )
    assert [d for _, d in promoted] == [index_digest, index_digest]
    assert resolve_digest(f"{registry}/{SRC}:index-final") == index_digest
    assert resolve_digest(f"{registry}/{DST}:index") == index_digest
    assert resolve_digest(f"{registry}/{DST}@{child_digest}") == child_digest


@pytest.mark.docker
def test_unverified_unpinned_and_foreign_targets_are_refused(pushed: Pushed) -> None:
    registry = pushed.registry
    before = set(tags_list(registry, SRC))
    unverified = f"{registry}/{SRC}@{pushed.unverified_digest}"
    with pytest.raises(EnvbuildError) as refused:
        promote_by_digest(unverified, ["refused"])
    assert refused.value.message == f"{unverified} {NOT_VERIFIED}"
    assert f"envbuild verify {unverified}" in (refused.value.fix or "")

    with pytest.raises(UsageError):
        promote_by_digest(pushed.verified, ["refused"])
    with pytest.raises(UsageError, match="stays inside one registry"):
        promote_by_digest(f"{registry}/{SRC}@{pushed.verified_digest}", [f"ghcr.io/{SRC}:refused"])
    assert "refused" not in set(tags_list(registry, SRC)) - before


def test_no_credentials_in_put_errors(push_registry: PushRegistry, tmp_path: Path) -> None:
    password = "pw-Zx81-not-in-messages"
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(f"someone:{password}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {push_registry.host: {"auth": auth}}}))
    push_registry.refuse_token = True
    with pytest.raises(EnvbuildError) as refused:
        put_manifest(f"{push_registry.host}/x/y:v1", b"{}", "application/json", docker_config=str(config))
    text = f"{refused.value.render()} {refused.value!r}"
    assert "docker login" in text and password not in text and auth not in text
