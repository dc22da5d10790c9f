"""Issue 33: a server that redirects to itself ended `envbuild` in requests' TooManyRedirects (an
internal error). It is a clear error naming the URL, raised at once (a loop is not retried), for every
request envbuild makes through _util.http: the registry client's and matrix refresh's. The server is a
real one on loopback that answers every GET with a 302 to the same path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envbuild.cli.app import main


class _Loop(BaseHTTPRequestHandler):
    asked = 0

    def do_GET(self) -> None:
        type(self).asked += 1
        self.send_response(302)
        self.send_header("Location", self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def looping() -> Iterator[str]:
    _Loop.asked = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Loop)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_registry_that_redirects_to_itself_is_a_clear_error(
    looping: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", f"{looping}/acme/train@sha256:{'a' * 64}", "--gpu", "H100"])
    err = capsys.readouterr().err
    assert code == 1 and "redirected more than 30 times (a redirect loop)" in err, err
    assert "internal error" not in err and looping in err
    assert _Loop.asked <= 31 + 2  # one chain of redirects (and a token probe), never retried
