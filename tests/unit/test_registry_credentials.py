"""Where a registry login is found (envbuild.oci.credentials), without a registry: Docker Hub's config
key, `auths` forms, and an identity token traded for an access token at a real token service on
127.0.0.1 (the OAuth2 refresh-token grant the docker CLI uses)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from envbuild.oci.credentials import find_credentials
from envbuild.oci.registry import resolve_digest
from tests.helpers.registry import (
    LoopbackServer,
    RegistryHandler,
    basic_auth,
    helper_calls,
    write_config_json,
    write_credential_helper,
)

HUB_KEY = "https://index.docker.io/v1/"
DIGEST = "sha256:" + hashlib.sha256(b"{}").hexdigest()  # the manifest body the server sends


@pytest.fixture
def helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    write_credential_helper(directory, "hub", user="hubuser", secret="hub-secret")
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


@pytest.mark.parametrize("registry", ["docker.io", "index.docker.io", "registry-1.docker.io"])
def test_docker_hub_is_asked_for_under_the_cli_key(registry: str, helpers: Path, tmp_path: Path) -> None:
    config = write_config_json(tmp_path / "d", {"credHelpers": {HUB_KEY: "hub"}})
    found = find_credentials(registry, config)
    assert found is not None and (found.username, found.password) == ("hubuser", "hub-secret")
    assert helper_calls(helpers, "hub") == [(["get"], HUB_KEY)]
    assert "hub-secret" not in repr(found)


def test_docker_hub_auths_entry_under_the_cli_key(tmp_path: Path) -> None:
    config = write_config_json(tmp_path / "d", {"auths": {HUB_KEY: {"auth": basic_auth("u", "p")}}})
    found = find_credentials("docker.io", config)
    assert found is not None and found.basic() == ("u", "p")
    assert find_credentials("ghcr.io", config) is None


def test_auths_username_and_password_fields(tmp_path: Path) -> None:
    config = write_config_json(tmp_path / "d", {"auths": {"ghcr.io": {"username": "u", "password": "p"}}})
    found = find_credentials("ghcr.io", config)
    assert found is not None and found.basic() == ("u", "p")


class OAuthRegistry(LoopbackServer):
    """A registry whose token service (on its own host and port) takes only the refresh-token grant."""

    refresh = "refresh-9c1e-identity"

    def __init__(self) -> None:
        self.forms: list[dict[str, list[str]]] = []
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != "Bearer access-1":
                    realm = f"http://127.0.0.1:{outer.port}/token"
                    challenge = f'Bearer realm="{realm}",service="reg",scope="repository:x/y:pull"'
                    return self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', challenge)
                self.reply(200, b"{}", digest=DIGEST)

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                outer.forms.append(form)
                if form.get("grant_type") == ["refresh_token"] and form.get("refresh_token") == [
                    outer.refresh
                ]:
                    return self.reply(200, json.dumps({"access_token": "access-1"}).encode())
                self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}')

        super().__init__(Handler)


@pytest.fixture
def oauth() -> Iterator[OAuthRegistry]:
    with OAuthRegistry() as server:
        yield server


def test_an_identity_token_in_auths_is_traded_for_an_access_token(
    oauth: OAuthRegistry, tmp_path: Path
) -> None:
    config = write_config_json(
        tmp_path / "d", {"auths": {oauth.host: {"identitytoken": OAuthRegistry.refresh}}}
    )
    assert resolve_digest(f"{oauth.host}/x/y:v1", docker_config=config) == DIGEST
    assert oauth.forms[0]["service"] == ["reg"] and oauth.forms[0]["scope"] == ["repository:x/y:pull"]


def test_a_helper_token_login_is_an_identity_token(oauth: OAuthRegistry, tmp_path: Path, monkeypatch) -> None:
    directory = tmp_path / "bin"
    write_credential_helper(directory, "acr", user="<token>", secret=OAuthRegistry.refresh)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    config = write_config_json(tmp_path / "d", {"credsStore": "acr"})
    assert resolve_digest(f"{oauth.host}/x/y:v1", docker_config=config) == DIGEST
    assert helper_calls(directory, "acr") == [(["get"], oauth.host)]
