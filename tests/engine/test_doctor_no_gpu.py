"""`envbuild doctor --no-gpu` on a CPU CI runner: the real Engine, its BuildKit client and a real
registry (anonymous, and Debian's docker-registry with an htpasswd file), and no nvidia-smi at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.nvsmi import by_name, doctor
from tests.helpers.registry import start_htpasswd_registry, stop, write_config_json, write_credential_helper

pytestmark = pytest.mark.docker


def test_no_gpu_passes_on_a_cpu_runner(capsys, anonymous_registry: str, tmp_path: Path, monkeypatch) -> None:
    code, report = doctor(capsys, "--no-gpu", "--registry", anonymous_registry)
    checks = by_name(report)
    assert code == 0, report
    assert set(checks) == {"host platform", "docker engine", "buildkit", f"registry {anonymous_registry}"}
    assert checks["docker engine"]["status"] == "ok" and checks["docker engine"]["evidence"].startswith(
        "Docker "
    )
    assert checks["buildkit"]["status"] == "ok"
    assert checks[f"registry {anonymous_registry}"]["status"] == "ok"


def test_no_gpu_fails_on_a_registry_wanting_a_login(capsys, tmp_path: Path, monkeypatch) -> None:
    user, password = "envbuild", "pw-doctor-Lm4-not-shown"
    host, process = start_htpasswd_registry(tmp_path / "htpasswd", user, password)
    try:
        monkeypatch.setenv("DOCKER_CONFIG", write_config_json(tmp_path / "none", {}))
        code, report = doctor(capsys, "--no-gpu", "--registry", host)
        login = by_name(report)[f"registry {host}"]
        assert code == 1 and login["status"] == "fail"
        assert f"docker login {host}" in login["fix"]

        helpers = tmp_path / "bin"
        monkeypatch.setenv("PATH", f"{helpers}{os.pathsep}{os.environ['PATH']}")
        write_credential_helper(helpers, "ci", user=user, secret=password)
        monkeypatch.setenv("DOCKER_CONFIG", write_config_json(tmp_path / "ci", {"credsStore": "ci"}))
        code, report = doctor(capsys, "--no-gpu", "--registry", host)
        login = by_name(report)[f"registry {host}"]
        assert code == 0 and login["status"] == "ok" and "docker-credential-ci" in login["evidence"]
        assert password not in str(report)
    finally:
        stop(process)
