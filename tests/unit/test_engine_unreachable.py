"""envbuild.engine with no engine behind it: the real docker SDK against a socket nobody listens on.
Every request fails as one EngineError with a fix, and the best-effort calls (a record's engine
version, undoing a failed promotion's tags) never raise."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.engine import current_engine, use_engine
from envbuild.engine.base import UNREACHABLE_FIX, EngineError
from envbuild.engine.docker_engine import DockerEngine


@pytest.fixture
def nowhere(tmp_path: Path) -> DockerEngine:
    return DockerEngine(base_url=f"unix://{tmp_path / 'no-engine.sock'}")


def test_every_request_is_one_engine_error_with_a_fix(nowhere: DockerEngine) -> None:
    for request in (nowhere.client, nowhere.api, lambda: nowhere.inspect_image("debian:bookworm")):
        with pytest.raises(EngineError) as raised:
            request()
        assert raised.value.fix == UNREACHABLE_FIX
        assert raised.value.status is None  # not reached: no HTTP status
        assert "no-engine.sock" in raised.value.message or "connect" in raised.value.message.lower()


def test_best_effort_calls_answer_none_or_nothing(nowhere: DockerEngine) -> None:
    assert nowhere.version() is None
    assert nowhere.remove_tags(["example.com/a:b"]) is None


def test_the_stages_use_the_engine_set_for_the_process(nowhere: DockerEngine) -> None:
    """use_engine reaches every call site: verify's label reader fails on `nowhere`, not on
    whatever DOCKER_HOST names."""
    from envbuild.errors import VerifyError
    from envbuild.image.imagelabels import image_labels

    use_engine(nowhere)
    try:
        assert current_engine() is nowhere
        with pytest.raises(VerifyError, match="no Docker Engine answered"):
            image_labels("envbuild-test/not-there:latest")
    finally:
        use_engine(None)
    assert isinstance(current_engine(), DockerEngine) and current_engine() is not nowhere
