"""Build backends: the classic builder through the SDK (`api`) and the client with BuildKit (`buildkit`).

The Docker tests build tiny contexts on the local Debian base image (see test_render_docker) and remove
every image they make, by id: nothing is ever tagged.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from pathlib import Path

import pytest

from envbuild.errors import BuildError, EnvbuildError
from envbuild.image import engine
from envbuild.image.engine import BuildResult, Progress, build_image, choose_backend
from tests.test_render_docker import BASE_IMAGE, bookworm_image, docker  # bookworm_image: a fixture

BACKENDS = ["api", "buildkit"]


# --- without an Engine -----------------------------------------------------------------------------


def fake_cli(tmp_path: Path, version: str, buildx: bool) -> str:
    script = tmp_path / f"docker-{version}-{int(buildx)}"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/calls\n'
        f'if [ "$1" = version ]; then echo {version}; exit 1; fi\n'
        f'if [ "$1" = buildx ]; then exit {0 if buildx else 1}; fi\n'
        "exit 2\n"
    )
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_BUILDKIT_CACHE", {})


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize(
    ("version", "buildx", "expected"),
    [
        ("20.10.24+dfsg1", False, True),
        ("22.06.0", False, True),
        ("28.2.2", False, False),
        ("28.2.2", True, True),
    ],
)
def test_buildkit_available_by_client_version_or_buildx(
    tmp_path: Path, version: str, buildx: bool, expected: bool
) -> None:
    cli = fake_cli(tmp_path, version, buildx)
    assert engine.buildkit_available(cli) is expected
    calls = (tmp_path / "calls").read_text()
    assert engine.buildkit_available(cli) is expected  # cached: the client is not asked again
    assert (tmp_path / "calls").read_text() == calls


@pytest.mark.usefixtures("fresh_cache")
def test_choose_backend_without_buildkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CLI", fake_cli(tmp_path, "28.2.2", False))
    assert choose_backend("auto") == "api"
    assert choose_backend("api") == "api"
    with pytest.raises(BuildError) as raised:
        choose_backend("buildkit")
    assert "docker-buildx" in (raised.value.fix or "") and "--builder api" in (raised.value.fix or "")


def test_choose_backend_rejects_unknown_names() -> None:
    for name in ("kaniko", "", "BuildKit"):
        with pytest.raises(EnvbuildError) as raised:
            choose_backend(name)
        assert "auto" in (raised.value.fix or "")


def test_docker_cli_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CLI", "/opt/docker/bin/docker")
    assert engine.docker_cli() == "/opt/docker/bin/docker"


def test_progress_prints_plain_lines_on_step_change() -> None:
    out = io.StringIO()
    progress = Progress(out)
    for line in ("step 1/3: FROM x", "step 1/3: FROM x", "step 2/3: RUN echo hi", "step 3/3: LABEL x=y"):
        progress(line)
    progress.close()
    assert out.getvalue() == "step 1/3: FROM x\nstep 2/3: RUN echo hi\nstep 3/3: LABEL x=y\n"


def test_progress_redraws_one_line_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "40")
    out = Tty()
    progress = Progress(out)
    progress("step 2/10: RUN pip install --no-index --find-links /wheels torch==2.13.0")
    progress.close()
    text = out.getvalue()
    assert text.startswith("\r[step 2/10] RUN pip") and text.endswith("s)\x1b[K\n")
    assert len(text.split("\x1b[K")[0]) <= 41  # the "\r" plus 40 columns
    assert "torch" not in text


# --- with an Engine --------------------------------------------------------------------------------


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


@pytest.mark.docker
def test_auto_is_buildkit_here() -> None:
    assert choose_backend("auto") == "buildkit"


@pytest.mark.docker
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


@pytest.mark.docker
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


@pytest.mark.docker
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
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        build_image(ctx, backend=backend, log_path=str(log), progress=interrupt)
    assert time.monotonic() - started < 30
    assert log.read_text().endswith("# envbuild: build stopped: KeyboardInterrupt\n")
    # the Engine cancels the build: no container keeps sleeping (the classic builder's are listed)
    for _ in range(40):
        listed = docker("ps", "-a", "--no-trunc", "--format", "{{.Command}}").stdout
        if token not in listed:
            break
        time.sleep(0.5)
    assert token not in listed


@pytest.mark.docker
def test_api_backend_copies_files_from_the_context(
    tmp_path: Path, bookworm_image: str, image_ids: list[str]
) -> None:
    token = uuid.uuid4().hex
    ctx = context(tmp_path, "COPY payload.txt /opt/payload.txt", files={"payload.txt": token})
    result = build_image(ctx, backend="api", log_path=str(tmp_path / "build.log"))
    image_ids.append(result.image_id)
    ran = docker("run", "--rm", "--network", "none", result.image_id, "cat", "/opt/payload.txt")
    assert ran.stdout == token


def test_a_missing_context_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError):
        build_image(str(tmp_path / "nope"), backend="api", log_path=str(tmp_path / "build.log"))
