"""Issue 33, hostile package indexes as `envbuild matrix refresh` reads them (envbuild.refresh.upstream
and envbuild.refresh.members): a loopback server that answers a JSON request endlessly, declares a
10 GiB body, nests its JSON 100,000 deep, or answers a range request with more bytes than were asked.
Each case: the EnvbuildError text (exit 1 in the CLI), the bytes the server managed to send counted,
and nothing left in the directory members are written to.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envbuild._util import limits
from envbuild.errors import EnvbuildError
from envbuild.refresh.members import read_members
from envbuild.refresh.upstream import Http

CHUNK = b" " * 65536
ENOUGH = limits.DOCUMENT_BYTES.get() + (256 << 20)  # the server stops here even if nobody hangs up


class Hostile:
    """A loopback server whose every GET is `answer(handler)`; `sent` counts the body bytes written."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler, Hostile], None]) -> None:
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with contextlib.suppress(OSError):  # the client hung up
                    answer(self, outer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        self.sent += len(data)


@pytest.fixture
def serve() -> Iterator[Callable[..., Hostile]]:
    started: list[Hostile] = []

    def start(answer: Callable[[BaseHTTPRequestHandler, Hostile], None]) -> Hostile:
        started.append(Hostile(answer))
        return started[-1]

    yield start
    for server in started:
        server.server.shutdown()
        server.server.server_close()


def endless(handler: BaseHTTPRequestHandler, server: Hostile, status: int = 200, **headers: str) -> None:
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", **headers}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.close_connection = True
    server.write(handler, b'{"releases": {')
    while server.sent < ENOUGH:
        server.write(handler, CHUNK)


def test_an_endless_json_answer_stops_at_the_document_limit(serve) -> None:
    server = serve(endless)
    with pytest.raises(EnvbuildError) as caught:
        Http(retries=0).json(f"{server.url}/pypi/torch/json")
    assert "larger than envbuild reads" in caught.value.message and caught.value.exit_code == 1
    assert server.url in caught.value.message
    # the reader hung up at the limit: what was sent is the limit plus what socket buffers took
    assert server.sent < limits.DOCUMENT_BYTES.get() + (32 << 20), server.sent


def test_a_declared_10_gib_answer_is_refused_before_its_body_is_read(serve) -> None:
    def declared(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(10 << 30))
        handler.end_headers()
        while server.sent < ENOUGH:
            server.write(handler, CHUNK)

    server = serve(declared)
    with pytest.raises(EnvbuildError) as caught:
        Http(retries=0).json(f"{server.url}/pypi/torch/json")
    assert "larger than envbuild reads" in caught.value.message
    assert server.sent < 32 << 20, server.sent  # only what the socket buffers took, never read


def test_json_nested_past_any_parser_is_a_malformed_answer(serve) -> None:
    body = b"[" * 100_000 + b"]" * 100_000

    def nested(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        server.write(handler, body)

    server = serve(nested)
    with pytest.raises(EnvbuildError) as caught:
        Http(retries=0).json(f"{server.url}/pypi/torch/json")
    assert "not JSON" in caught.value.message and server.url in caught.value.message


def test_a_range_answered_with_more_than_was_asked_is_refused_and_nothing_is_written(
    serve, tmp_path: Path
) -> None:
    """A 206 to the wheel's suffix-range probe whose body never ends: stopped at the block asked for."""

    def ranged(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
        endless(handler, server, 206, **{"Content-Range": "bytes 0-262143/262144"})

    server = serve(ranged)
    out = tmp_path / "members"
    with pytest.raises(EnvbuildError) as caught:
        read_members(Http(retries=0), f"{server.url}/x-1.0-py3-none-any.whl", lambda name: True, str(out))
    assert "larger than envbuild reads" in caught.value.message
    assert server.sent < 32 << 20, server.sent
    assert not out.exists() or not any(out.rglob("*"))
