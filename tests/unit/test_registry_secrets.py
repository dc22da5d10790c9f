"""Credentials stay secret against hostile registries on 127.0.0.1 (real HTTP servers, no mocks):
one that echoes the Authorization it received in its error, and one whose Bearer challenge sends the
client to a token service on another host:port over plain http."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.registry import promote_by_digest, put_manifest, resolve_digest
from tests.helpers.registry import (
    EchoingRegistry,
    ForeignRealmRegistry,
    LoopbackServer,
    RegistryHandler,
    TokenServer,
    free_port,
    verified_image,
    write_docker_config,
)

USER, PASSWORD = "ci-bot", "pw-Q7v2-never-shown"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in (PASSWORD, BASIC, TokenServer.token):
            assert secret not in text, f"{secret!r} leaked in: {text}"


def everything_said(error: EnvbuildError) -> str:
    return f"{error.render()}\n{error}\n{error!r}\n{error.args!r}"


@pytest.fixture
def echoing() -> Iterator[EchoingRegistry]:
    with EchoingRegistry() as server:
        yield server


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    with TokenServer() as server:
        yield server


# --- a registry that echoes the Authorization header in its error -----------------------------------


def test_an_echoed_authorization_is_not_in_the_registry_error(
    echoing: EchoingRegistry, tmp_path: Path
) -> None:
    config = write_docker_config(tmp_path / "docker", echoing.host, USER, PASSWORD)
    with pytest.raises(EnvbuildError) as caught:
        put_manifest(f"{echoing.host}/x/y:v2", b"{}", "application/json", docker_config=config)
    # the registry did get the credentials and did echo them: the test would see a leak
    assert ("PUT", "/v2/x/y/manifests/v2", f"Basic {BASIC}") in echoing.seen
    assert_no_secret(everything_said(caught.value))
    # what went wrong is still said
    assert "HTTP 400" in caught.value.message and "DENIED" in caught.value.message


def test_an_echoed_authorization_is_not_on_the_command_line(
    echoing: EchoingRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv(
        "DOCKER_CONFIG", write_docker_config(tmp_path / "docker", echoing.host, USER, PASSWORD)
    )
    code = main(["promote", f"{echoing.host}/x/y@{echoing.digest}", "--to", "v2"])
    printed = capsys.readouterr()
    assert code == 1, printed.err
    assert any(method == "PUT" and auth == f"Basic {BASIC}" for method, _, auth in echoing.seen)
    assert_no_secret(printed.out, printed.err)
    assert "refused the manifest" in printed.err and "DENIED" in printed.err


# --- a Bearer realm on another host:port over plain http ----------------------------------------------


def test_a_plain_http_realm_on_another_port_is_refused_and_gets_no_credentials(
    token_server: TokenServer, tmp_path: Path
) -> None:
    realm = f"http://127.0.0.1:{token_server.port}/token"
    with ForeignRealmRegistry(realm) as registry:
        config = write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        with pytest.raises(UsageError) as caught:
            resolve_digest(f"{registry.host}/x/y:v1", docker_config=config)
    assert token_server.seen == []  # not even asked: no credentials, no request
    assert realm in caught.value.message and "https" in caught.value.message
    assert caught.value.fix and registry.host in caught.value.message
    assert_no_secret(everything_said(caught.value))


def test_a_plain_http_realm_on_another_port_is_refused_on_the_command_line(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    realm = f"http://127.0.0.1:{token_server.port}/token"
    with ForeignRealmRegistry(realm) as registry:
        monkeypatch.setenv(
            "DOCKER_CONFIG", write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        )
        code = main(["promote", f"{registry.host}/x/y@{registry.digest}", "--to", "v2"])
    printed = capsys.readouterr()
    assert code == 2, printed.err
    assert token_server.seen == []
    assert realm in printed.err and "fix:" in printed.err and "internal error" not in printed.err
    assert_no_secret(printed.out, printed.err)


@pytest.mark.parametrize(
    "realm",
    [
        "ftp://127.0.0.1/token",  # neither https nor http
        "file:///etc/passwd",
        "/token",  # no host at all
        "http://localhost:{port}/token",  # the registry's port, but another host name
        "http://127.0.0.1/token",  # the registry's host, but port 80
    ],
)
def test_other_unsafe_realms_are_refused(realm: str, tmp_path: Path) -> None:
    with ForeignRealmRegistry(realm) as registry:
        config = write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        with pytest.raises(UsageError, match="realm") as caught:
            resolve_digest(f"{registry.host}/x/y:v1", docker_config=config)
    assert repr(realm.replace("{port}", str(registry.port))) in caught.value.message


def test_a_https_realm_on_another_host_is_allowed(tmp_path: Path) -> None:
    """Docker Hub's realm is auth.docker.io, another host, over https: envbuild asks it (here nothing
    listens, so the answer is "unreachable", not a refusal of the realm)."""
    realm = f"https://127.0.0.1:{free_port()}/token"
    with ForeignRealmRegistry(realm) as registry:
        config = write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        with pytest.raises(EnvbuildError) as caught:
            resolve_digest(f"{registry.host}/x/y:v1", docker_config=config, retries=0)
    assert not isinstance(caught.value, UsageError)
    assert "unreachable" in caught.value.message


def test_the_registry_itself_as_a_plain_http_realm_is_allowed(tmp_path: Path) -> None:
    """A registry on loopback that is its own token service (same host and port) is asked, with the
    credentials: the challenge is answered, not refused (this one then refuses the token it has no
    route for)."""
    with ForeignRealmRegistry("http://127.0.0.1:{port}/token") as registry:
        config = write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        with pytest.raises(EnvbuildError) as caught:
            resolve_digest(f"{registry.host}/x/y:v1", docker_config=config, retries=0)
    assert not isinstance(caught.value, UsageError)


# --- a URL the registry names on another host gets no credentials ------------------------------------


class Elsewhere(LoopbackServer):
    """Any host:port other than the registry's: records (method, Authorization) of what it gets."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        outer = self

        class Handler(RegistryHandler):
            def answer(self) -> None:
                outer.seen.append((self.command, self.headers.get("Authorization", "")))
                self.reply(204, b"")

            do_GET = do_DELETE = do_PUT = do_PATCH = answer

        super().__init__(Handler)


class UploadElsewhereRegistry(LoopbackServer):
    """A Basic-auth registry with one verified image, x/y@`digest`, that answers a cross-repository
    blob mount with 202 and an upload Location on `elsewhere` (plain http, another port)."""

    def __init__(self, elsewhere: str) -> None:
        self.manifest, self.digest, self.config, self.config_digest = verified_image()
        outer = self

        class Handler(RegistryHandler):
            def answer(self) -> None:
                path = self.path.partition("?")[0]
                if not self.headers.get("Authorization"):
                    return self.reply(401, b"{}", challenge='Basic realm="r"')
                if path == f"/v2/x/y/manifests/{outer.digest}":
                    return self.reply(200, outer.manifest, digest=outer.digest, media_type="application/json")
                if path == f"/v2/x/y/blobs/{outer.config_digest}":
                    return self.reply(200, outer.config)
                if self.command == "POST" and path == "/v2/z/w/blobs/uploads/":
                    self.send_response(202)
                    self.send_header("Location", f"http://{elsewhere}/upload/1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                return self.reply(404, b'{"errors": [{"code": "BLOB_UNKNOWN"}]}')

            do_GET = do_HEAD = do_POST = answer

        super().__init__(Handler)


def test_an_upload_location_on_another_host_gets_no_credentials(tmp_path: Path) -> None:
    with Elsewhere() as elsewhere, UploadElsewhereRegistry(elsewhere.host) as registry:
        config = write_docker_config(tmp_path / "docker", registry.host, USER, PASSWORD)
        with pytest.raises(EnvbuildError, match="did not mount blob"):
            promote_by_digest(
                f"{registry.host}/x/y@{registry.digest}", [f"{registry.host}/z/w:v1"], docker_config=config
            )
    assert elsewhere.seen == [("DELETE", "")]  # the cancelled upload, without the registry's credentials


def test_a_refused_realm_is_named_without_its_user_info(tmp_path: Path) -> None:
    realm = f"http://{USER}:{PASSWORD}@127.0.0.1:{free_port()}/token"
    with ForeignRealmRegistry(realm) as registry, pytest.raises(UsageError) as caught:
        resolve_digest(f"{registry.host}/x/y:v1", docker_config=str(tmp_path))
    assert "http://***@127.0.0.1:" in caught.value.message
    assert_no_secret(everything_said(caught.value))
