"""The one retry policy (envbuild/_util/http.py) against real HTTP servers on 127.0.0.1: 429 and 503
answers with Retry-After (seconds and HTTP dates), a cap on how long a server may ask for, and a
connection reset; through the registry client and the refresh's index reader, which share it."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from envbuild._util.http import RETRY_AFTER_CAP_S, retry_after
from envbuild.errors import EnvbuildError
from envbuild.oci.registry import list_tags
from envbuild.refresh.upstream import Http
from tests.helpers.registry import ScriptedServer

TAGS = b'{"name": "x/y", "tags": ["v1"]}'
OK = (200, {})


def test_429_twice_with_retry_after_seconds_then_an_http_date_then_200() -> None:
    soon = formatdate(time.time() + 1, usegmt=True)  # "Mon, 30 Nov 2026 23:59:59 GMT"
    script = [(429, {"Retry-After": "1"}), (429, {"Retry-After": soon}), OK]
    with ScriptedServer(script, TAGS) as server:
        url, tags = list_tags(f"{server.host}/x/y", retries=3)
    assert tags == ["v1"] and url.endswith("/v2/x/y/tags/list")
    assert len(server.seen) == 3


def test_a_server_that_always_answers_429_is_named_as_rate_limiting() -> None:
    with (
        ScriptedServer([(429, {"Retry-After": "0"})], TAGS) as server,
        pytest.raises(EnvbuildError) as caught,
    ):
        list_tags(f"{server.host}/x/y", retries=2)
    assert len(server.seen) == 3  # 1 + retries
    message = caught.value.message
    assert "rate limited" in message and server.host in message and "/v2/x/y/tags/list" in message
    assert "3 attempt(s)" in message and caught.value.fix


def test_a_retry_after_beyond_the_cap_fails_at_once_saying_when_to_come_back() -> None:
    with (
        ScriptedServer([(429, {"Retry-After": "3600"})], TAGS) as server,
        pytest.raises(EnvbuildError) as caught,
    ):
        list_tags(f"{server.host}/x/y", retries=3)
    assert len(server.seen) == 1  # not waited for
    message = caught.value.message
    assert "come back in 3600 s" in message and "UTC" in message and server.host in message
    assert f"at most {RETRY_AFTER_CAP_S:g} s" in message and "rate limited" in message


def test_503_with_retry_after_is_retried_and_404_is_an_answer() -> None:
    with ScriptedServer([(503, {"Retry-After": "0"}), OK], TAGS) as server:
        assert list_tags(f"{server.host}/x/y", retries=1)[1] == ["v1"]
    assert len(server.seen) == 2
    with ScriptedServer([(404, {})], TAGS) as server, pytest.raises(EnvbuildError, match="not found"):
        list_tags(f"{server.host}/x/y", retries=3)
    assert len(server.seen) == 2  # the tag list, then the probe that tells tag from repository


def test_a_connection_reset_once_is_retried() -> None:
    with ScriptedServer(["reset", OK], TAGS) as server:
        assert list_tags(f"{server.host}/x/y", retries=1)[1] == ["v1"]
    assert len(server.seen) == 2


def test_the_refresh_index_reader_shares_the_policy() -> None:
    with ScriptedServer([(429, {"Retry-After": "0"}), "reset", OK], b'{"releases": {}}') as server:
        assert Http(retries=2).json(f"http://{server.host}/pypi/torch/json") == {"releases": {}}
    assert len(server.seen) == 3
    limited = pytest.raises(EnvbuildError, match=r"rate limited.*pypi/torch/json")
    with ScriptedServer([(429, {})], b"{}") as server, limited:
        Http(retries=0).json(f"http://{server.host}/pypi/torch/json")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_values(value: str | None, expected: float | None) -> None:
    assert retry_after(value) == expected


def test_retry_after_as_a_future_http_date() -> None:
    now = 1_800_000_000.0
    assert retry_after(formatdate(now + 30, usegmt=True), now=now) == 30.0
