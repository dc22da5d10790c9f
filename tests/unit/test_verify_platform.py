"""verify and a foreign-architecture image (issue 19, item 4): the image's platform is read before any
container is made; an image this host cannot run (no QEMU handler) or a GPU smoke step that would run
emulated are refused with the fix, and an emulated CPU run says so in the report. The Engine is the
loopback API endpoint (tests/helpers/engine.py); the binfmt_misc directory is a real one of the test's
own ($ENVBUILD_BINFMT_DIR), standing for a host with the handler enabled, disabled or absent."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envbuild.errors import VerifyError
from envbuild.image.platforms import BINFMT_ENV, host_platform
from envbuild.image.verify import verify_image
from envbuild.smoke.report import validate
from tests.helpers.engine import LoopbackEngine
from tests.helpers.paths import FIXTURES

PASSED = json.loads((FIXTURES / "smoke" / "torch-cpu-passed.json").read_text())
INSPECT = "GET /images/envbuild-test/any:tag/json"


def foreign() -> tuple[str, str]:
    """(an architecture this host is not, the binfmt handler that would run it)."""
    host = host_platform()
    if host is not None and host.architecture == "arm64":
        return "amd64", "qemu-x86_64"
    return "arm64", "qemu-aarch64"


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., LoopbackEngine]]:
    started: list[LoopbackEngine] = []

    def start(architecture: str) -> LoopbackEngine:
        stdout = "step 1/20 loss 1.07\n" + json.dumps(PASSED) + "\n"
        server = LoopbackEngine(stdout, exit_code=0, architecture=architecture).__enter__()
        started.append(server)
        monkeypatch.setenv("DOCKER_HOST", server.docker_host)
        monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
        monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
        return server

    yield start
    for server in started:
        server.__exit__()


def binfmt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handler: str, state: str | None) -> None:
    """A binfmt_misc directory with `handler` in `state` ("enabled", "disabled"; None: absent)."""
    directory = tmp_path / "binfmt_misc"
    directory.mkdir()
    if state is not None:
        (directory / handler).write_text(f"{state}\ninterpreter /usr/libexec/qemu-binfmt/x\nflags: PF\n")
    monkeypatch.setenv(BINFMT_ENV, str(directory))


@pytest.mark.parametrize("state", [None, "disabled"])
def test_a_foreign_image_without_a_qemu_handler_is_refused_before_any_container(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str | None
) -> None:
    arch, handler = foreign()
    binfmt(tmp_path, monkeypatch, handler, state)
    server = engine(arch)
    with pytest.raises(VerifyError) as caught:
        verify_image("envbuild-test/any:tag", device="cpu")
    assert f"the image is linux/{arch}" in caught.value.message and handler in caught.value.message
    assert "qemu-user-static" in caught.value.fix and "binfmt-support" in caught.value.fix
    assert f"run it on a linux/{arch} host" in caught.value.fix
    assert server.calls() == [INSPECT]  # nothing was created, so nothing is left to remove


def test_a_foreign_image_runs_its_cpu_smoke_step_emulated_and_says_so(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arch, handler = foreign()
    binfmt(tmp_path, monkeypatch, handler, "enabled")
    server = engine(arch)
    verification = verify_image("envbuild-test/any:tag", device="cpu")
    assert verification.passed is True
    assert verification.platform == f"linux/{arch}" and verification.emulated is True
    assert (
        verification.report["image_platform"] == f"linux/{arch}" and verification.report["emulated"] is True
    )
    assert validate(verification.report) == []  # the schema documents the host's two keys
    assert server.calls()[0] == INSPECT and server.calls()[-1] == "DELETE /containers/ID"


def test_a_gpu_smoke_step_of_a_foreign_image_is_refused_even_with_qemu(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arch, handler = foreign()
    binfmt(tmp_path, monkeypatch, handler, "enabled")
    server = engine(arch)
    with pytest.raises(VerifyError) as caught:
        verify_image("envbuild-test/any:tag", device="gpu")
    assert "QEMU emulation, which reaches no GPU" in caught.value.message
    assert f"on a linux/{arch} GPU host" in caught.value.fix and "--smoke-device cpu" in caught.value.fix
    assert server.calls() == [INSPECT]


def test_an_image_of_a_platform_envbuild_does_not_know_is_refused(engine) -> None:
    server = engine("s390x")
    with pytest.raises(VerifyError) as caught:
        verify_image("envbuild-test/any:tag", device="cpu")
    assert "linux/s390x" in caught.value.message and "linux/arm64" in caught.value.fix
    assert server.calls() == [INSPECT]
