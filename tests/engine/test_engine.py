"""Both build backends on the real Engine: an untagged image, the failing step named, an interrupt
that stops the build."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from envbuild.errors import BuildError
from envbuild.image.builder import BuildResult, build_image, choose_backend
from tests.helpers.docker import BASE_IMAGE, docker, exit_code_or_gone

pytestmark = pytest.mark.docker

BACKENDS = ["api", "buildkit"]


@pytest.fixture
def image_ids(tmp_path: Path):
    """Ids to remove after the test; also the classic builder's intermediate images named in the logs."""
    ids: list[str] = []
    yield ids
    for image_id in ids:
        docker("rmi", "-f", image_id, check=False)
    base = docker("image", "inspect", "--format", "{{.Id}}", BASE_IMAGE, check=False).stdout.strip()
    for log in tmp_path.rglob("*.log"):
        for short in re.findall(r"^ ---> ([0-9a-f]{12})$", log.read_text(), re.MULTILINE):
            if not base.startswith(f"sha256:{short}"):
                docker("rmi", short, check=False)  # never -f: an image still in use stays


def context(tmp_path: Path, *lines: str, files: dict[str, str] | None = None) -> str:
    directory = tmp_path / "context"
    directory.mkdir()
    (directory / "Dockerfile").write_text("\n".join([f"FROM {BASE_IMAGE}", *lines]) + "\n")
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
    return str(directory)


def test_auto_is_buildkit_here() -> None:
    assert choose_backend("auto") == "buildkit"


@pytest.mark.parametrize("backend", BACKENDS)
def test_builds_an_untagged_image(
    tmp_path: Path, bookworm_image: str, image_ids: list[str], backend: str
) -> None:
    token = uuid.uuid4().hex
    ctx = context(tmp_path, f"RUN echo built-{token} && echo hi > /hi", "LABEL x=y")
    log = tmp_path / "logs" / "deep" / "build.log"
    seen: list[str] = []
    result = build_image(
        ctx,
        backend=backend,
        log_path=str(log),
        no_cache=True,
        progress=seen.append,
        labels={"io.envbuild.test": token},
    )
    image_ids.append(result.image_id)
    assert isinstance(result, BuildResult)
    assert result.backend == backend and result.image_id.startswith("sha256:") and result.seconds > 0
    assert result.steps >= 2
    inspected = json.loads(docker("image", "inspect", result.image_id).stdout)[0]
    assert inspected["Id"] == result.image_id
    assert inspected["RepoTags"] == []
    assert inspected["Config"]["Labels"]["x"] == "y"
    assert inspected["Config"]["Labels"]["io.envbuild.test"] == token
    text = log.read_text()
    assert f"built-{token}" in text  # the RUN's own output: the log holds everything
    assert any(line.startswith("step 2/") and "RUN echo built-" in line for line in seen), seen
    ran = docker("run", "--rm", "--network", "none", result.image_id, "cat", "/hi")
    assert ran.stdout.strip() == "hi"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_run_names_the_step(
    tmp_path: Path, bookworm_image: str, image_ids: list[str], backend: str
) -> None:
    token = uuid.uuid4().hex
    ctx = context(tmp_path, f"RUN echo before-{token}", "RUN false", "LABEL x=y")
    log = tmp_path / "build.log"
    with pytest.raises(BuildError) as raised:
        build_image(ctx, backend=backend, log_path=str(log))
    error = raised.value
    assert "step 3/" in error.message and "RUN false" in error.message, error.message
    assert error.fix == f"read the full log: {log}"
    text = log.read_text()
    assert f"before-{token}" in text and "RUN false" in text
    assert "build stopped: BuildError" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_step_quotes_its_tools_cause(
    tmp_path: Path, bookworm_image: str, image_ids: list[str], backend: str
) -> None:
    """apt-get itself, with no package lists, for a package the image cannot have: the error quotes
    apt's E: line and its exit status, on both builders (the classic one wraps stderr in colour)."""
    ctx = context(tmp_path, "RUN apt-get install -y --no-install-recommends no-such-package-envbuild")
    log = tmp_path / "build.log"
    with pytest.raises(BuildError) as raised:
        build_image(ctx, backend=backend, log_path=str(log), no_cache=True)
    lines = raised.value.message.splitlines()
    assert lines[0] == (
        "docker build failed at step 2/2: RUN apt-get install -y --no-install-recommends "
        "no-such-package-envbuild (exit code 100); the step's output says:"
    )
    assert lines[1:] == ["    E: Unable to locate package no-such-package-envbuild"]
    assert raised.value.fix == f"read the full log: {log}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_interrupt_stops_the_build_and_propagates(
    tmp_path: Path, bookworm_image: str, image_ids: list[str], backend: str
) -> None:
    token = uuid.uuid4().hex
    ctx = context(tmp_path, f"RUN echo {token} && sleep 60")

    def interrupt(line: str) -> None:
        if line.startswith("step 2/"):
            raise KeyboardInterrupt

    log = tmp_path / "build.log"
    with pytest.raises(KeyboardInterrupt):
        build_image(ctx, backend=backend, log_path=str(log), progress=interrupt)
    assert log.read_text().endswith("# envbuild: build stopped: KeyboardInterrupt\n")
    # the Engine cancels the build: no container sleeps its 60 s to the end (the classic builder's are
    # listed). `docker wait` returns when each stops: killed (non-zero) or already removed, never 0.
    listed = docker("ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Command}}").stdout.splitlines()
    sleeping = [line.split(" ", 1)[0] for line in listed if token in line]
    assert all(exit_code_or_gone(container) != 0 for container in sleeping), sleeping


def test_api_backend_copies_files_from_the_context(
    tmp_path: Path, bookworm_image: str, image_ids: list[str]
) -> None:
    token = uuid.uuid4().hex
    ctx = context(tmp_path, "COPY payload.txt /opt/payload.txt", files={"payload.txt": token})
    result = build_image(ctx, backend="api", log_path=str(tmp_path / "build.log"))
    image_ids.append(result.image_id)
    ran = docker("run", "--rm", "--network", "none", result.image_id, "cat", "/opt/payload.txt")
    assert ran.stdout == token
