"""Package indexes that fail the way real ones do, on loopback: a closed port, one answering a fixed
HTTP status (503, 401), and an HTTPS one whose certificate nobody trusts. Real servers and real
sockets; uv meets them exactly as it would meet a broken index."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.registry import LoopbackServer, RegistryHandler, free_port

OPENSSL_SELF_SIGNED = (
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=127.0.0.1",
)


def closed_url() -> str:
    """An index URL on a loopback port nothing listens on: connection refused."""
    return f"http://127.0.0.1:{free_port()}/simple"


class StatusIndex(LoopbackServer):
    """Answers every request with `status` (a 503 of a failing mirror, a 401 of a private index)."""

    def __init__(self, status: int) -> None:
        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                self.reply(status, b"", media_type="text/html")

            do_HEAD = do_GET

        super().__init__(Handler)

    @property
    def url(self) -> str:
        return f"http://{self.host}/simple"


@contextmanager
def untrusted_tls_index(directory: Path) -> Iterator[str]:
    """An HTTPS index with a fresh self-signed certificate (openssl), which no trust store holds;
    its URL."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [*OPENSSL_SELF_SIGNED, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server = StatusIndex(404)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    with server:
        yield f"https://{server.host}/simple"


def no_retries_and_no_proxy(monkeypatch) -> None:
    """uv as a CI runner without a proxy sees it: no proxy variables (a NO_PROXY that lists
    127.0.0.1 would hide a test's own proxy), and no retries, so a refused connection fails at once
    instead of after uv's back-off."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.delenv("UV_OFFLINE", raising=False)
