"""Registries for tests: Debian's docker-registry as a real process, and the pieces of the small
in-process registry-shaped HTTP servers some tests use to script an exact answer (a real HTTP server,
not a mock of requests)."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from envbuild.oci.registry import MANIFEST_ACCEPT
from tests.helpers.docker import docker


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(host: str, auth: tuple[str, str] | None = None) -> bool:
    try:
        return requests.get(f"http://{host}/v2/", timeout=2, auth=auth).status_code == 200
    except requests.RequestException:
        return False


def start_registry(directory: Path, extra_yaml: str = "") -> tuple[str, subprocess.Popen[bytes]]:
    """Debian's docker-registry on a free loopback port, storing under `directory`."""
    host = f"127.0.0.1:{free_port()}"
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'storage'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: {host}\n" + extra_yaml
    )
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    for _ in range(100):
        try:
            requests.get(f"http://{host}/v2/", timeout=1)
            return host, process
        except requests.RequestException:
            if process.poll() is not None:
                break
            time.sleep(0.2)
    stop(process)
    pytest.fail(
        f"docker-registry did not start on {host}: {(directory / 'registry.log').read_text()[-2000:]}"
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def push(tag: str, *config: str) -> None:
    pushed = docker(*config, "push", tag, check=False)
    assert pushed.returncode == 0, pushed.stdout[-2000:] + pushed.stderr[-2000:]


def manifest_digest(host: str, repo: str, tag: str, auth: tuple[str, str] | None = None) -> str:
    response = requests.get(
        f"http://{host}/v2/{repo}/manifests/{tag}", headers={"Accept": MANIFEST_ACCEPT}, auth=auth, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.headers["Docker-Content-Digest"]


def delete_manifest(host: str, repo: str, digest: str, auth: tuple[str, str] | None = None) -> None:
    with contextlib.suppress(requests.RequestException):
        requests.delete(f"http://{host}/v2/{repo}/manifests/{digest}", auth=auth, timeout=10)


def write_docker_config(directory: Path, host: str, user: str, password: str) -> str:
    """A docker config directory whose config.json logs `user` in to `host` (the `auths` form)."""
    directory.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (directory / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return str(directory)


# --- in-process registry-shaped servers -----------------------------------------------------------


class RegistryHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that answers the way a registry does: JSON bodies, a Bearer challenge, and
    the Docker-Content-Digest header."""

    def log_message(self, *args: object) -> None:
        pass

    def reply(
        self, status: int, body: bytes, challenge: str | None = None, digest: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if challenge:
            self.send_header("WWW-Authenticate", challenge)
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()
        self.wfile.write(body)


class LoopbackServer:
    """Serves a RegistryHandler subclass on a free loopback port while the `with` block runs."""

    def __init__(self, handler: type[RegistryHandler]) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.host = f"127.0.0.1:{self.port}"

    def __enter__(self) -> LoopbackServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
