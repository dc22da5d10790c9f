"""Registry-side promotion: `promote_by_digest` puts a verified image's exact manifest bytes under new
tags of the same registry, with no layer pulled or pushed. Against Debian's docker-registry (marked
docker) with images built FROM the local bookworm base; and the PUT's Bearer scope against a real HTTP
token server on 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.registry import (
    promote_by_digest,
    put_manifest,
)
from tests.helpers.registry import LoopbackServer, RegistryHandler

# --- the PUT's auth against a real HTTP token server (no mock of requests) -------------------------


class PushRegistry(LoopbackServer):
    """/v2/x/y/manifests/<tag> takes a PUT only with a token issued for scope repository:x/y:pull,push;
    its 401 challenge names only "pull", so the client must ask for the push scope itself."""

    def __init__(self) -> None:
        self.token_queries: list[str] = []
        self.puts: list[tuple[str, str, bytes]] = []  # (path, Content-Type, body)
        self.refuse_token = False
        outer = self

        class Handler(RegistryHandler):
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

        super().__init__(Handler)


@pytest.fixture
def push_registry() -> Iterator[PushRegistry]:
    with PushRegistry() as server:
        yield server


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
