"""Debian's docker-registry, for real: digests that match the registry's and docker's, a missing tag
told from a missing repository, and a login it demands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.errors import EnvbuildError
from envbuild.oci.registry import pinned, resolve_digest
from tests.helpers.docker import docker
from tests.helpers.registry import (
    delete_manifest,
    manifest_digest,
    push,
    start_registry,
    stop,
    write_docker_config,
)

pytestmark = pytest.mark.docker

REPO = "envbuild-test/bookworm"


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


def test_anonymous_registry_digest_matches_registry_and_docker(pushed_anonymous: str) -> None:
    host = pushed_anonymous.split("/", 1)[0]
    expected = manifest_digest(host, REPO, "latest")
    assert resolve_digest(pushed_anonymous) == expected
    repo_digests = json.loads(
        docker("image", "inspect", pushed_anonymous, "--format", "{{json .RepoDigests}}").stdout
    )
    assert f"{host}/{REPO}@{expected}" in repo_digests
    assert pinned(pushed_anonymous) == f"{pushed_anonymous}@{expected}"


def test_missing_tag_and_missing_repository_are_told_apart(pushed_anonymous: str) -> None:
    host = pushed_anonymous.split("/", 1)[0]
    with pytest.raises(EnvbuildError) as tag_missing:
        resolve_digest(f"{host}/{REPO}:no-such-tag")
    assert tag_missing.value.message == f"tag 'no-such-tag' not found in {host}/{REPO}"
    with pytest.raises(EnvbuildError) as repo_missing:
        resolve_digest(f"{host}/envbuild-test/no-such-repo:latest")
    assert repo_missing.value.message == f"repository envbuild-test/no-such-repo not found on registry {host}"
    assert tag_missing.value.fix and repo_missing.value.fix


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
