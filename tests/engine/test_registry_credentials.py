"""Registry logins the way the docker CLI finds them (credHelpers, then credsStore, then auths),
against Debian's docker-registry with an htpasswd file and stand-in `docker-credential-*` helpers on
PATH that speak the real protocol; `lock` and `promote --to` through a helper."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.errors import EnvbuildError
from envbuild.lockfile.read import load_lock
from envbuild.oci.registry import resolve_digest
from tests.helpers.locking import run_lock, spec_text
from tests.helpers.registry import (
    basic_auth,
    helper_calls,
    manifest_digest,
    start_htpasswd_registry,
    stop,
    upload_image,
    write_config_json,
    write_credential_helper,
)

pytestmark = pytest.mark.docker

USER, PASSWORD = "envbuild", "pw-helper-7Qx2-not-in-messages"
REPO = "envbuild-test/helper-login"


class Login:
    """An htpasswd registry holding REPO:v1, and a directory of helpers first on PATH."""

    def __init__(self, host: str, digest: str, helpers: Path, root: Path) -> None:
        self.host, self.digest, self.helpers, self.root = host, digest, helpers, root

    def config(self, name: str, config: dict) -> str:
        return write_config_json(self.root / name, config)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    host, process = start_htpasswd_registry(tmp_path_factory.mktemp("htpasswd"), USER, PASSWORD)
    try:
        yield host, upload_image(host, REPO, "v1", auth=(USER, PASSWORD))
    finally:
        stop(process)


@pytest.fixture
def login(registry: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Login:
    helpers = tmp_path / "bin"
    write_credential_helper(helpers, "good", user=USER, secret=PASSWORD)
    write_credential_helper(helpers, "stale", user=USER, secret="stale-" + PASSWORD)
    write_credential_helper(helpers, "empty", mode="notfound")
    write_credential_helper(helpers, "crashy", user=USER, secret=PASSWORD, mode="crash")
    write_credential_helper(helpers, "garbled", secret=PASSWORD, mode="garbage")
    monkeypatch.setenv("PATH", f"{helpers}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    return Login(*registry, helpers, tmp_path)


def test_cred_helpers_win_over_creds_store_which_wins_over_auths(login: Login) -> None:
    ref, wrong = f"{login.host}/{REPO}:v1", {login.host: {"auth": basic_auth(USER, "wrong")}}
    first = login.config("all", {"credHelpers": {login.host: "good"}, "credsStore": "stale", "auths": wrong})
    assert resolve_digest(ref, docker_config=first) == login.digest
    assert helper_calls(login.helpers, "good") == [(["get"], login.host)]  # the protocol: `get`, URL on stdin
    assert helper_calls(login.helpers, "stale") == []

    store = login.config(
        "store", {"credHelpers": {"other.example": "stale"}, "credsStore": "good", "auths": wrong}
    )
    assert resolve_digest(ref, docker_config=store) == login.digest

    auths = login.config(
        "auths", {"auths": {f"http://{login.host}/v2/": {"auth": basic_auth(USER, PASSWORD)}}}
    )
    assert resolve_digest(ref, docker_config=auths) == login.digest

    stale = login.config("stale", {"credHelpers": {login.host: "stale"}, "credsStore": "good"})
    with pytest.raises(EnvbuildError) as refused:
        resolve_digest(ref, docker_config=stale)
    text = f"{refused.value.render()} {refused.value!r}"
    assert "docker-credential-stale" in text and f"docker login {login.host}" in text
    assert PASSWORD not in text


def test_a_helper_without_credentials_means_anonymous_then_docker_login(login: Login) -> None:
    # as in the docker CLI, the helper decides: its "not found" is not a reason to read `auths`
    config = login.config(
        "empty", {"credsStore": "empty", "auths": {login.host: {"auth": basic_auth(USER, PASSWORD)}}}
    )
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"{login.host}/{REPO}:v1", docker_config=config)
    assert f"no credentials for {login.host}" in caught.value.message
    assert f"docker login {login.host}" in caught.value.message and caught.value.exit_code == 1
    assert helper_calls(login.helpers, "empty") == [(["get"], login.host)]


@pytest.mark.parametrize("helper", ["crashy", "garbled", "absent"])
def test_a_failing_helper_is_named_and_what_it_printed_is_not_shown(
    login: Login, helper: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = login.config(helper, {"credHelpers": {login.host: helper}})
    with pytest.raises(EnvbuildError) as caught:
        resolve_digest(f"{login.host}/{REPO}:v1", docker_config=config)
    text = f"{caught.value.render()} {caught.value!r}"
    assert f"docker-credential-{helper}" in text and login.host in text and caught.value.fix
    assert PASSWORD not in text
    if helper == "absent":
        assert "not on PATH" in text
    # the same on the command line: exit 1, the helper named, its output nowhere
    os.environ["DOCKER_CONFIG"] = config  # restored by the fixture's monkeypatch
    assert main(["promote", f"{login.host}/{REPO}@{login.digest}", "--to", "v2"]) == 1
    out, err = capsys.readouterr()
    assert f"docker-credential-{helper}" in err and "Traceback" not in err
    assert PASSWORD not in out + err


def test_promote_to_and_lock_through_a_credential_helper(
    login: Login, wheelhouse: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", login.config("desktop", {"credsStore": "good"}))
    source = f"{login.host}/{REPO}@{login.digest}"
    assert main(["promote", source, "--to", "promoted"]) == 0, capsys.readouterr()
    assert manifest_digest(login.host, REPO, "promoted", auth=(USER, PASSWORD)) == login.digest
    capsys.readouterr()

    project = login.root / "project"
    project.mkdir()
    with PackageIndex(wheelhouse) as index:
        (project / "envbuild.toml").write_text(spec_text(index.url, index.url, '["six==1.16.0"]'))
        code, out, err = run_lock(capsys, project, "--base-image", f"{login.host}/{REPO}:v1")
    assert code == 0, err
    locked, _ = load_lock(str(project / "envbuild.lock"))
    assert locked.targets[0].base_image == f"{login.host}/{REPO}:v1@{login.digest}"
    assert PASSWORD not in out + err
