"""Issue 33's primitives: the named bounds, the bounded HTTP body reader, the regular-file reader.

The HTTP cases talk to a real server on loopback (a ThreadingHTTPServer started here) through a real
requests session, the way the registry client and the channel reader do; the server counts what it
managed to send, so each bound is shown in bytes, never in seconds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envbuild._util import httpbody, limits
from envbuild._util.files import NotReadable, read_regular
from envbuild.errors import EnvbuildError, UsageError


class _Hostile(BaseHTTPRequestHandler):
    """/claims-huge: a Content-Length of 1.5 GiB; /endless: a chunked body that never ends;
    /trickle: one byte per chunk, slowly; /small: 10 bytes."""

    protocol_version = "HTTP/1.1"
    sent = 0
    # set when the test ends: a handler still trickling stops (it waits on this, never on time.sleep,
    # which another test may monkeypatch while this server's threads still run)
    stop = threading.Event()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        type(self).sent += len(data)

    def do_GET(self) -> None:
        if self.path == "/slow-headers":  # the status line and headers, one byte per 50 ms
            try:
                for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"p" * 600 + b"\r\n\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    type(self).sent += 1
                    if self.stop.wait(0.05):
                        return
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.path == "/claims-huge":
            self.send_response(200)
            self.send_header("Content-Length", str(3 << 29))
            self.end_headers()
            return
        if self.path == "/small":
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(b"0123456789")
            return
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if self.path == "/endless":
                block = b"x" * 65536
                for _ in range(100_000):  # 6.5 GB if nobody stopped reading
                    self._chunk(block)
            else:  # /trickle
                for _ in range(600):
                    self._chunk(b"y")
                    self.wfile.flush()
                    if self.stop.wait(0.05):
                        return
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Hostile.sent = 0
    _Hostile.stop = threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    _Hostile.stop.set()
    httpd.shutdown()
    httpd.server_close()


def _get(url: str):
    import requests

    return requests.get(url, stream=True, timeout=10)


def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read(server: str) -> None:
    with pytest.raises(EnvbuildError) as caught:
        httpbody.read(_get(f"{server}/claims-huge"), what="a manifest", limit=limits.MANIFEST_BYTES)
    assert "a manifest is larger than envbuild reads (4 MiB)" in caught.value.message
    assert "/claims-huge" in caught.value.message


def test_an_endless_body_stops_at_the_limit(server: str) -> None:
    with pytest.raises(EnvbuildError) as caught:
        httpbody.read(_get(f"{server}/endless"), what="a blob", limit=1 << 20)
    assert "larger than envbuild reads (1 MiB)" in caught.value.message
    # what the server got out before the connection closed: the limit plus socket buffers, far
    # below the 6.5 GB it would send to a reader without one
    assert _Hostile.sent < 64 << 20


def test_a_body_that_trickles_past_the_deadline_is_stopped(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_HTTP_DEADLINE_S", "1")
    with pytest.raises(EnvbuildError) as caught:
        httpbody.read(_get(f"{server}/trickle"), what="repodata.json", limit=1 << 20)
    assert "repodata.json did not arrive within 1 s" in caught.value.message
    assert "ENVBUILD_HTTP_DEADLINE_S" in (caught.value.fix or "")
    assert _Hostile.sent < 600  # stopped long before the server's 600 bytes


def test_an_answer_whose_headers_trickle_in_is_stopped_at_the_deadline(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_HTTP_DEADLINE_S", "1")
    with pytest.raises(EnvbuildError) as caught:
        httpbody.answered(lambda: _get(f"{server}/slow-headers"), url=f"{server}/slow-headers")
    assert "/slow-headers: the server's answer did not begin within 1 s" in caught.value.message
    assert _Hostile.sent < 600  # each byte reset requests' per-read timeout; the deadline did not reset


def test_an_answer_that_comes_in_time_is_returned_and_errors_are_raised_as_they_were(server: str) -> None:
    response = httpbody.answered(lambda: _get(f"{server}/small"), url=f"{server}/small")
    assert httpbody.read(response, what="a file", limit=100) == b"0123456789"
    with pytest.raises(ZeroDivisionError):
        httpbody.answered(lambda: 1 // 0, url=server)


def test_save_leaves_nothing_behind_when_the_body_is_too_large(server: str, tmp_path) -> None:
    target = tmp_path / "cache" / "repodata.json"
    with pytest.raises(EnvbuildError):
        httpbody.save(_get(f"{server}/endless"), str(target), what="repodata.json", limit=1 << 20)
    assert list((tmp_path / "cache").iterdir()) == []


def test_save_writes_a_whole_body(server: str, tmp_path) -> None:
    target = tmp_path / "small"
    count = httpbody.save(_get(f"{server}/small"), str(target), what="a file", limit=100)
    assert count == 10 and target.read_bytes() == b"0123456789"
    assert sorted(os.listdir(tmp_path)) == ["small"]


def test_an_override_must_be_a_positive_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILD_MAX_UNPACK_RATIO", "0")
    with pytest.raises(UsageError) as caught:
        limits.UNPACK_RATIO.get()
    assert "ENVBUILD_MAX_UNPACK_RATIO='0' is not a positive whole number of ratio" in caught.value.message
    monkeypatch.setenv("ENVBUILD_MAX_UNPACK_RATIO", "50")
    assert limits.UNPACK_RATIO.get() == 50
    monkeypatch.delenv("ENVBUILD_MAX_UNPACK_RATIO")
    assert limits.UNPACK_RATIO.get() == limits.UNPACK_RATIO.default


def test_every_limit_has_a_distinct_name_and_variable() -> None:
    names = [limit.name for limit in limits.ALL]
    variables = [limit.env for limit in limits.ALL if limit.env]
    assert len(set(names)) == len(names) and len(set(variables)) == len(variables)
    assert all(v.startswith("ENVBUILD_") for v in variables)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_device_is_not_read(path: str) -> None:
    with pytest.raises(NotReadable, match="a device, not a regular file"):
        read_regular(path, limit=1 << 20)


def test_a_fifo_without_a_writer_is_refused_without_waiting(tmp_path) -> None:
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    with pytest.raises(NotReadable, match="a FIFO, not a regular file"):
        read_regular(str(fifo), limit=1 << 20)


def test_a_sparse_file_over_the_cap_is_refused_unread(tmp_path) -> None:
    big = tmp_path / "matrix.toml"
    with open(big, "wb") as handle:
        handle.truncate(4 << 30)  # 4 GiB of holes: no disk, and never read
    with pytest.raises(NotReadable, match="4 GiB, more than the 1 MiB envbuild reads"):
        read_regular(str(big), limit=1 << 20)


def test_a_regular_file_within_the_cap_is_read_whole(tmp_path) -> None:
    small = tmp_path / "os.toml"
    small.write_bytes(b"a" * 1000)
    assert read_regular(str(small), limit=1000) == b"a" * 1000
    with pytest.raises(NotReadable):
        read_regular(str(small), limit=999)
