"""verify's pass/fail decision without dockerd (issue 23, item 5): `verify_image` runs against a Docker
Engine API endpoint on loopback (tests/helpers/engine.py) whose container "printed" a real captured
smoke report (tests/fixtures/smoke/) and exited with a chosen code. The decision is the report's own
verdict, its exit code and its gates re-judged: each test below breaks exactly one of the three."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator

import pytest

from envbuild.errors import VerifyError
from envbuild.image.platforms import host_platform
from envbuild.image.verify import verify_image
from tests.helpers.engine import IMAGE_ID, LoopbackEngine
from tests.helpers.paths import FIXTURES

PASSED = json.loads((FIXTURES / "smoke" / "torch-cpu-passed.json").read_text())
FAILED = json.loads((FIXTURES / "smoke" / "torch-cpu-lr0-failed.json").read_text())  # training gate failed
RUN = [
    "GET /images/envbuild-test/any:tag/json",  # its platform first: can this host run it at all
    "POST /containers/create",
    "GET /containers/ID/json",
    "POST /containers/ID/start",
    "POST /containers/ID/wait",
]
REMOVED = "DELETE /containers/ID"


def printed(report: dict) -> str:
    """What a smoke program prints: progress lines, then the report as the last line."""
    return "step 1/20 loss 1.07\nstep 20/20 loss 0.31\n" + json.dumps(report) + "\n"


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., LoopbackEngine]]:
    """Start a LoopbackEngine with the given output and point DOCKER_HOST at it."""
    started: list[LoopbackEngine] = []

    def start(stdout: str, *, exit_code: int, stderr: str = "") -> LoopbackEngine:
        server = LoopbackEngine(stdout, exit_code=exit_code, stderr=stderr).__enter__()
        started.append(server)
        monkeypatch.setenv("DOCKER_HOST", server.docker_host)
        monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
        monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
        return server

    yield start
    for server in started:
        server.__exit__()


def test_a_passing_report_and_exit_0_pass(engine) -> None:
    server = engine(printed(PASSED), exit_code=0)
    verification = verify_image("envbuild-test/any:tag", device="cpu")
    assert verification.passed is True
    assert verification.exit_code == 0 and verification.image_id == IMAGE_ID and verification.device == "cpu"
    # the host's facts beside the program's: the image's platform, and that it ran natively
    host = host_platform()
    assert verification.report == {
        **PASSED,
        "image_platform": host and host.name,
        "emulated": False,
        "runtime": "docker",
        "gpu_access": None,  # a CPU smoke step takes no GPU path
    }
    assert verification.platform == (host and host.name) and verification.emulated is False
    calls = server.calls()
    assert calls[:5] == RUN and calls[-1] == REMOVED, calls


def test_a_report_with_a_failed_gate_does_not_pass(engine) -> None:
    server = engine(printed(FAILED), exit_code=1)
    verification = verify_image("envbuild-test/any:tag", device="cpu")
    assert verification.passed is False
    assert verification.report["gates"]["training"] == "failed"
    assert server.calls()[-1] == REMOVED


def test_a_failed_gate_does_not_pass_even_when_the_program_exits_0(engine) -> None:
    engine(printed(FAILED), exit_code=0)
    assert verify_image("envbuild-test/any:tag", device="cpu").passed is False


def test_a_passing_report_with_a_nonzero_exit_does_not_pass(engine) -> None:
    """The program crashed after printing its report (a segfault at exit, say): not a pass."""
    engine(printed(PASSED), exit_code=139)
    verification = verify_image("envbuild-test/any:tag", device="cpu")
    assert verification.passed is False and verification.exit_code == 139


def test_a_report_that_says_passed_against_its_own_numbers_is_an_error(engine) -> None:
    forged = copy.deepcopy(PASSED)
    forged["loss_last"] = forged["losses"][0] + 1  # the loss went up, yet "passed": true
    server = engine(printed(forged), exit_code=0)
    with pytest.raises(VerifyError) as raised:
        verify_image("envbuild-test/any:tag", device="cpu")
    assert raised.value.message.startswith("the smoke report says it passed, but ")
    assert "loss did not decrease" in raised.value.message
    assert server.calls()[-1] == REMOVED


def test_a_cpu_report_does_not_pass_a_gpu_verify(engine) -> None:
    """The gates are judged on the device asked for: a CPU run cannot vouch for the GPU."""
    engine(printed(PASSED), exit_code=0)
    with pytest.raises(VerifyError, match="the smoke report says it passed, but "):
        verify_image("envbuild-test/any:tag", device="gpu")


def test_no_report_is_an_error_naming_the_last_output(engine) -> None:
    server = engine("Traceback (most recent call last):\n", exit_code=1, stderr="ImportError: libcuda.so.1\n")
    with pytest.raises(VerifyError) as raised:
        verify_image("envbuild-test/any:tag", device="cpu")
    assert raised.value.message == "the smoke program printed no report (exit 1)"
    assert raised.value.fix == "its last output was: ImportError: libcuda.so.1"
    assert server.calls()[-1] == REMOVED


def test_a_report_off_the_schema_is_an_error(engine) -> None:
    broken = {key: value for key, value in PASSED.items() if key != "gates"}
    engine(printed(broken), exit_code=0)
    with pytest.raises(
        VerifyError, match=r"does not match envbuild/smoke/schema\.json: report: missing 'gates'"
    ):
        verify_image("envbuild-test/any:tag", device="cpu")
