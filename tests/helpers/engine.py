"""A Docker Engine API endpoint on loopback for verify's decision without dockerd: it speaks the part
of the Engine API that `envbuild.image.verify.verify_image` uses (version, image inspect, container
create, inspect, start, wait, logs, remove) and answers with what a smoke program printed and its
exit code. It is a real HTTP server the real docker SDK talks to (DOCKER_HOST=tcp://...), not a
mock of docker: the client's request building, log demultiplexing and error handling all run."""

from __future__ import annotations

import json
import re
import struct

from envbuild.image.platforms import host_platform
from tests.helpers.registry import LoopbackServer, RegistryHandler

IMAGE_ID = "sha256:" + "5" * 64
CONTAINER_ID = "c" * 64
_VERSIONED = re.compile(r"^/v\d+\.\d+(/.*)$")


def _frame(stream: int, data: bytes) -> bytes:
    """One frame of the Engine's multiplexed log stream: 1 stdout, 2 stderr (non-tty containers)."""
    return struct.pack(">BxxxL", stream, len(data)) + data if data else b""


class LoopbackEngine(LoopbackServer):
    """The Engine whose one container's program printed `stdout` and `stderr` and exited `exit_code`.

    `seen` lists (method, path without the /v1.NN prefix) of every request, in order: a test proves
    what verify asked the Engine for (the container removed after the run, say) from it."""

    def __init__(
        self, stdout: str, *, exit_code: int, stderr: str = "", architecture: str | None = None
    ) -> None:
        """architecture: what the image's config says it is for (None: this host's, as a native
        image); verify reads it before it creates a container."""
        self.seen: list[tuple[str, str]] = []
        host = host_platform()
        image = {
            "Id": IMAGE_ID,
            "Os": "linux",
            "Architecture": architecture or (host.architecture if host else "amd64"),
        }
        outer = self
        logs = {
            "stdout=1&stderr=0": _frame(1, stdout.encode()),
            "stdout=0&stderr=1": _frame(2, stderr.encode()),
        }
        inspected = json.dumps(
            {"Id": CONTAINER_ID, "Image": IMAGE_ID, "Config": {"Tty": False}, "State": {"Running": False}}
        ).encode()

        class Handler(RegistryHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                raw, _, query = self.path.partition("?")
                matched = _VERSIONED.match(raw)
                path = matched.group(1) if matched else raw
                outer.seen.append((self.command, path))
                container = f"/containers/{CONTAINER_ID}"
                if path == "/version":
                    return self.reply(200, json.dumps({"ApiVersion": "1.43", "Version": "24.0.0"}).encode())
                if self.command == "GET" and path.startswith("/images/") and path.endswith("/json"):
                    return self.reply(200, json.dumps(image).encode())
                if (self.command, path) == ("POST", "/containers/create"):
                    return self.reply(201, json.dumps({"Id": CONTAINER_ID, "Warnings": []}).encode())
                if (self.command, path) == ("GET", f"{container}/json"):
                    return self.reply(200, inspected)
                if (self.command, path) in (("POST", f"{container}/start"), ("DELETE", container)):
                    return self.reply(204, b"")
                if (self.command, path) == ("POST", f"{container}/wait"):
                    return self.reply(200, json.dumps({"StatusCode": exit_code, "Error": None}).encode())
                if (self.command, path) == ("GET", f"{container}/logs"):
                    which = "stdout=1&stderr=0" if "stdout=1" in query else "stdout=0&stderr=1"
                    return self.reply(200, logs[which], media_type="application/vnd.docker.raw-stream")
                self.reply(404, json.dumps({"message": f"no such endpoint: {self.command} {path}"}).encode())

            do_GET = do_POST = do_DELETE = answer

        super().__init__(Handler)

    @property
    def docker_host(self) -> str:
        """The DOCKER_HOST value that points the docker SDK here."""
        return f"tcp://{self.host}"

    def calls(self) -> list[str]:
        """The container calls in order, the container id shown as ID: "POST /containers/create",
        "POST /containers/ID/start", ..., "DELETE /containers/ID"."""
        return [
            f"{method} {path.replace(CONTAINER_ID, 'ID')}" for method, path in self.seen if path != "/version"
        ]
