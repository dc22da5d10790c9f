"""Recorded upstream answers served on 127.0.0.1, for `envbuild matrix refresh` tests.

A real HTTP server (the refresh's `requests` code runs unchanged) that answers GETs from a table of
recorded responses, honours Range requests on the paths that allow them (as PyPI's file host does),
can demand a Docker-Hub-style Bearer token, and logs every request with the bytes it sent back.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class Answer:
    def __init__(
        self,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        ranges: bool = False,
    ) -> None:
        self.body, self.status, self.content_type = body, status, content_type
        self.headers = dict(headers or {})
        self.ranges = ranges


class Upstream:
    """`routes[path_with_query]` (or the path alone) -> Answer; unknown paths answer 404.

    bearer_prefix: paths under it need "Authorization: Bearer <token>", which /token hands out after
    a 401 with a WWW-Authenticate challenge, as registry-1.docker.io does.
    """

    TOKEN = "recorded-token"

    def __init__(self, *, bearer_prefix: str | None = None) -> None:
        self.routes: dict[str, Answer] = {}
        self.bearer_prefix = bearer_prefix
        self.log: list[tuple[str, str | None, int, int]] = []  # (path, Range header, status, bytes sent)
        self.closed_paths: set[str] = set()  # paths whose connection is dropped without an answer
        self._server: ThreadingHTTPServer | None = None

    def add(self, path: str, answer: Answer) -> None:
        self.routes[path] = answer

    @property
    def root(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def bytes_sent(self, path_prefix: str) -> int:
        return sum(sent for path, _, _, sent in self.log if path.startswith(path_prefix))

    def __enter__(self) -> Upstream:
        server = _QuietServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (envbuild stops reading a body at its bound, or closes an
    error answer unread) is what the tests provoke: not a traceback on stderr, which the tests read."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path
            bare = path.split("?", 1)[0]
            if bare in upstream.closed_paths:
                self.close_connection = True
                self.connection.close()
                return
            if bare == "/token":
                self._send(200, b'{"token": "%s"}' % Upstream.TOKEN.encode(), "application/json", {})
                return
            needs_token = upstream.bearer_prefix and bare.startswith(upstream.bearer_prefix)
            if needs_token and self.headers.get("Authorization") != f"Bearer {Upstream.TOKEN}":
                challenge = (
                    f'Bearer realm="http://{self.headers["Host"]}/token",service="recorded",'
                    f'scope="repository:nvidia/cuda:pull"'
                )
                self._send(
                    401,
                    b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                    "application/json",
                    {"WWW-Authenticate": challenge},
                )
                return
            answer = upstream.routes.get(path) or upstream.routes.get(bare)
            if answer is None:
                self._send(404, b'{"errors":[{"code":"NOT_FOUND"}]}', "application/json", {})
                return
            wanted = self.headers.get("Range")
            if answer.ranges and wanted:
                self._send_range(answer, wanted)
                return
            headers = dict(answer.headers)
            if answer.ranges:
                headers["Accept-Ranges"] = "bytes"
            self._send(answer.status, answer.body, answer.content_type, headers)

        def _send_range(self, answer: Answer, wanted: str) -> None:
            size = len(answer.body)
            suffix = re.fullmatch(r"bytes=-(\d+)", wanted)
            span = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted)
            if suffix:
                start, stop = max(0, size - int(suffix.group(1))), size - 1
            elif span:
                start = int(span.group(1))
                stop = min(int(span.group(2)) if span.group(2) else size - 1, size - 1)
            else:
                self._send(416, b"", "text/plain", {})
                return
            headers = {"Content-Range": f"bytes {start}-{stop}/{size}", "Accept-Ranges": "bytes"}
            self._send(206, answer.body[start : stop + 1], answer.content_type, headers)

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
            upstream.log.append((self.path, self.headers.get("Range"), status, len(body)))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler
