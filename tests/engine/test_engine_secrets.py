"""Credentials in what the real Engine says appear nowhere envbuild writes: a push to a registry that
echoes the credentials it was sent (`envbuild build --push`: stdout, stderr, record.json, build.log),
and a build step that prints a credential (the BuildError, the log, the progress lines)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import BuildError
from envbuild.image.builder import build_image
from tests.helpers.docker import TORCH_SPEC, docker
from tests.helpers.registry import EchoingRegistry, write_docker_config

pytestmark = pytest.mark.docker

USER, PASSWORD = "ci-bot", "pw-Engine-9t4k-never-shown"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture
def echoing() -> Iterator[EchoingRegistry]:
    with EchoingRegistry() as server:
        yield server


def test_a_push_error_echoing_authorization_is_redacted_everywhere(
    tmp_path: Path,
    bookworm_image: str,
    wheelhouse: Path,
    echoing: EchoingRegistry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    repository = f"{echoing.host}/envbuild-test/echo"
    tag = f"{repository}:torch2.13.0-e2e"
    spec = tmp_path / "envbuild.toml"
    spec.write_text(
        TORCH_SPEC + f'\n[image]\nrepository = "{repository}"\ntags = ["torch{{framework_version}}-e2e"]\n'
    )
    monkeypatch.setenv(
        "DOCKER_CONFIG", write_docker_config(tmp_path / "docker", echoing.host, USER, PASSWORD)
    )
    out = tmp_path / "build"
    try:
        code = main(
            [
                "build",
                "-f",
                str(spec),
                "-o",
                str(out),
                "--wheelhouse",
                str(wheelhouse),
                "--base-image",
                bookworm_image,
                "--smoke-device",
                "cpu",
                "--push",
            ]
        )
    finally:
        docker("rmi", "-f", tag, check=False)
    printed = capsys.readouterr()
    assert code == 1, printed.err
    # the Engine did send the credentials, and the registry did echo them
    assert any(auth == f"Basic {BASIC}" for _, _, auth in echoing.seen), echoing.seen
    record_text = (out / "default" / "record.json").read_text()
    record = json.loads(record_text)
    assert record["status"] == "failed" and record["tags"] == []
    # what went wrong is still said
    assert f"pushing {tag} failed: denied: request refused" in printed.err
    assert f"pushing {tag} failed" in record["error"]
    everything = {
        "stdout": printed.out,
        "stderr": printed.err,
        "record.json": record_text,
        "build.log": (out / "default" / "build.log").read_text(),
    }
    for where, text in everything.items():
        for secret in (PASSWORD, BASIC):
            assert secret not in text, f"{secret} leaked in {where}"


@pytest.mark.parametrize("backend", ["api", "buildkit"])
def test_a_build_step_printing_credentials_is_redacted(
    tmp_path: Path, bookworm_image: str, backend: str
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {bookworm_image}\n"
        f'RUN echo "Authorization: Basic {BASIC}" \\\n'
        f' && echo "https://{USER}:{PASSWORD}@example.invalid/x" && false\n'
    )
    log = tmp_path / "build.log"
    lines: list[str] = []
    with pytest.raises(BuildError) as caught:
        build_image(str(context), backend=backend, log_path=str(log), progress=lines.append, no_cache=True)
    assert "at step 2/2" in caught.value.message  # the failure is still named
    everything = {
        "error": caught.value.render(),
        "build.log": log.read_text(),
        "progress": "\n".join(lines),
    }
    assert "***" in everything["build.log"]
    for where, text in everything.items():
        for secret in (PASSWORD, BASIC):
            assert secret not in text, f"{secret} leaked in {where}: {text[-1500:]}"
