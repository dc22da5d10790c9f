"""`envbuild doctor` refusing input it cannot use before any check runs (exit 2, the flag named), and
never showing the docker SDK's internal http+docker:// URLs; the --no-gpu mode's failures without an
Engine (a dead DOCKER_HOST) and against a registry that wants a login (a real HTTP server on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.nvsmi import by_name, doctor
from tests.helpers.paths import EXAMPLES
from tests.helpers.registry import LoopbackServer, RegistryHandler, basic_auth, write_config_json

SPEC = EXAMPLES / "torch-wheels" / "envbuild.toml"


def test_a_spec_given_as_the_lock_is_a_usage_error(capsys, fake_smi) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    assert main(["doctor", "--lock", str(SPEC)]) == 2
    out, err = capsys.readouterr()
    assert f"--lock {SPEC} is an envbuild spec (envbuild.toml), not a lock" in err
    assert "envbuild lock" in err and "envbuild.lock" in err and "Traceback" not in err
    assert out == ""  # refused before any check ran


@pytest.mark.parametrize("ref", ["bad ref!!", "UPPER/case:tag", "name:tag:tag"])
def test_a_malformed_image_reference_is_a_usage_error(capsys, fake_smi, ref: str) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    assert main(["doctor", "--image", ref]) == 2
    out, err = capsys.readouterr()
    assert f"--image {ref!r} is not an image reference" in err and "NAME[:TAG]" in err
    assert "http+docker" not in out + err and out == ""


def test_an_engine_error_shows_no_sdk_url(capsys, fake_smi) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    code, report = doctor(capsys, "--image", "envbuild-test/no-such-image:nowhere")
    assert code == 1
    assert "http+docker" not in json.dumps(report)


def test_no_gpu_without_an_engine_fails_with_a_fix(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/dead.sock")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, and no docker client for BuildKit
    code, report = doctor(capsys, "--no-gpu")
    checks = by_name(report)
    assert code == 1 and "nvidia-smi" not in checks and "nvidia runtime" not in checks
    engine = checks["docker engine"]
    assert engine["status"] == "fail" and "DOCKER_HOST" in engine["fix"]
    assert "http+docker" not in json.dumps(report)


class LoginRegistry(LoopbackServer):
    """GET /v2/ wants HTTP basic user:pw, as an htpasswd registry does."""

    def __init__(self) -> None:
        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") == "Basic " + basic_auth("user", "pw-Zq9"):
                    return self.reply(200, b"{}")
                self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', 'Basic realm="test"')

        super().__init__(Handler)


def test_registry_login_check_names_docker_login(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/dead.sock")
    with LoginRegistry() as registry:
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
        _, report = doctor(capsys, "--no-gpu", "--registry", registry.host)
        login = by_name(report)[f"registry {registry.host}"]
        assert login["status"] == "fail" and f"docker login {registry.host}" in login["fix"]
        monkeypatch.setenv(
            "DOCKER_CONFIG",
            write_config_json(
                tmp_path / "d", {"auths": {registry.host: {"auth": basic_auth("user", "pw-Zq9")}}}
            ),
        )
        _, report = doctor(capsys, "--no-gpu", "--registry", registry.host)
        login = by_name(report)[f"registry {registry.host}"]
        assert login["status"] == "ok" and "user" in login["evidence"] and "pw-Zq9" not in login["evidence"]


@pytest.mark.parametrize("host", ["https://ghcr.io", "ghcr.io/acme/train", "bad host"])
def test_a_registry_that_is_not_a_host_is_a_usage_error(capsys, host: str) -> None:
    assert main(["doctor", "--no-gpu", "--registry", host]) == 2
    err = capsys.readouterr().err
    assert f"--registry {host!r} is not a registry host" in err and "HOST[:PORT]" in err
