"""The progress lines of a push (issue 32: 6 GB pushed for 130 s with no line), from a real push
stream of dockerd 20.10 (tests/fixtures/push/README.md)."""

from __future__ import annotations

import json

import pytest

from envbuild.image import promote
from envbuild.image.promote import PushProgress
from tests.helpers.paths import FIXTURES

CHUNKS = [json.loads(line) for line in (FIXTURES / "push" / "bookworm-push.jsonl").read_text().splitlines()]


def test_each_line_says_the_bytes_sent_and_the_layers_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promote, "PROGRESS_EVERY_S", 0.0)  # a line per chunk, to see every state
    lines: list[str] = []
    progress = PushProgress("127.0.0.1:5000/envbuild-test/push-capture:two", lines.append)
    for chunk in CHUNKS:
        progress.update(chunk)
    assert lines, "the stream has layer chunks"
    assert all(line.startswith("push 127.0.0.1:5000/envbuild-test/push-capture:two: ") for line in lines)
    # the 30 MB layer's bytes rise to its total, and both layers end (one was already in the registry)
    assert lines[-1].endswith(": 30 of 30 MB of the layers started, 2 layer(s) done")
    sent = [int(line.split(": ")[1].split(" of ")[0].replace(",", "")) for line in lines]
    assert sent == sorted(sent) and sent[0] < sent[-1]


def test_without_a_sayer_nothing_is_kept() -> None:
    progress = PushProgress("r:t", None)
    for chunk in CHUNKS:
        progress.update(chunk)
    assert progress.layers == {} and progress.done == set()


def test_chunks_that_are_not_layer_progress_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promote, "PROGRESS_EVERY_S", 0.0)
    lines: list[str] = []
    progress = PushProgress("r:t", lines.append)
    malformed = {"id": "x", "status": "Pushing", "progressDetail": {"current": "1"}}
    for chunk in ("text", [1], {"id": 7}, malformed):
        progress.update(chunk)
    assert progress.layers == {} and all(" 0 of 0 MB" in line for line in lines)
