"""Build backends: the classic builder through the SDK (`api`) and the client with BuildKit (`buildkit`).

The Docker tests build tiny contexts on the local Debian base image (see test_render_docker) and remove
every image they make, by id: nothing is ever tagged.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from envbuild.errors import BuildError, EnvbuildError
from envbuild.image import builder as engine
from envbuild.image.builder import Progress, build_image, choose_backend

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


def test_a_missing_context_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError):
        build_image(str(tmp_path / "nope"), backend="api", log_path=str(tmp_path / "build.log"))
