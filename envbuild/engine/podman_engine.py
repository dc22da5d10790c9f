"""Podman, through its Docker-compatible API for what the stages ask and run, and `podman build` for
builds.

Podman has no daemon; its API is `podman system service`, which systemd usually starts on demand
(podman.socket) at /run/podman/podman.sock (root) or $XDG_RUNTIME_DIR/podman/podman.sock (rootless).
Where it is comes from CONTAINER_HOST (podman's own variable, unix:// only), else that socket. When no
service answers there, as on a login node without systemd's user session, envbuild starts one of its
own on a private socket for this run: `podman system service --time=N`, which ends by itself after N
idle seconds, and is stopped when envbuild exits. The same storage then serves `podman build`, the
API's runs, tags and pushes, so an image podman built is the image the smoke step ran.

The docker SDK speaks to the service unchanged: every stage's request (inspect, create, wait, logs,
tag, push) is the Docker Engine API, which Podman implements. What differs is said here once: the
socket, the build command, that GPUs come only through CDI, and the version's name.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from envbuild.engine.base import QUICK_S, VERSION_S, EngineError
from envbuild.engine.docker_engine import DockerEngine

SERVICE_IDLE_S = 120  # a service envbuild started ends this long after its last request
SERVICE_START_S = 20  # how long a starting service may take to answer
HOST_VAR = "CONTAINER_HOST"
NO_PODMAN_FIX = "install podman (apt-get install podman, dnf install podman), or use --engine docker"
SERVICE_FIX = (
    "start podman's API service: `systemctl --user enable --now podman.socket` (rootless), "
    "`systemctl enable --now podman.socket` (root), or `podman system service --time=0 &`"
)


def podman_cli() -> str | None:
    """$ENVBUILD_PODMAN, else the first podman on PATH."""
    return os.environ.get("ENVBUILD_PODMAN") or shutil.which("podman")


def default_socket() -> str:
    """Where podman.socket listens for this user: /run/podman for root, the user's runtime dir else."""
    if os.geteuid() == 0:
        return "/run/podman/podman.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    return os.path.join(runtime, "podman", "podman.sock")


class PodmanEngine(DockerEngine):
    name = "podman"
    title = "Podman"
    gpu_paths = ("cdi",)  # Podman has no --gpus device request: GPUs come only as CDI devices

    def __init__(self, *, base_url: str | None = None) -> None:
        super().__init__(base_url=base_url)
        self._service: subprocess.Popen[bytes] | None = None
        self._service_dir: str | None = None
        self.remote = False  # CONTAINER_HOST named the service: builds go to it with `podman --remote`

    def _where(self) -> dict[str, Any]:
        if self._service is not None and self._service.poll() is not None:
            self.stop()  # the service envbuild started ended itself after SERVICE_IDLE_S: start another
        if self.base_url is None:
            self.base_url = self._find_service()
        return {"base_url": self.base_url}

    def _find_service(self) -> str:
        named = os.environ.get(HOST_VAR, "").strip()
        if named:
            if not named.startswith("unix://"):
                raise EngineError(
                    f"{HOST_VAR}={named[:80]!r} is not a unix:// socket",
                    fix=f"point {HOST_VAR} at unix:///path/to/podman.sock (ssh:// is not supported), "
                    "or unset it",
                )
            self.remote = True
            return named
        socket = default_socket()
        if _answers(socket):
            return "unix://" + socket
        return self._start_service()

    def _start_service(self) -> str:
        cli = podman_cli()
        if not cli:
            raise EngineError("podman is not installed (no podman on PATH)", fix=NO_PODMAN_FIX)
        self._service_dir = tempfile.mkdtemp(prefix="envbuild-podman-")
        socket = os.path.join(self._service_dir, "podman.sock")
        try:
            self._service = subprocess.Popen(
                [cli, "system", "service", f"--time={SERVICE_IDLE_S}", "unix://" + socket],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a ^C to envbuild is envbuild's to handle; stop() ends it
            )
        except OSError as exc:
            raise EngineError(f"cannot run {cli}: {exc}", fix=NO_PODMAN_FIX) from None
        atexit.register(self.stop)
        deadline = time.monotonic() + SERVICE_START_S
        while time.monotonic() < deadline:
            if _answers(socket):
                return "unix://" + socket
            if self._service.poll() is not None:
                break
            time.sleep(0.05)
        said = b""
        if self._service.poll() is not None and self._service.stderr is not None:
            said = self._service.stderr.read(2000)
        self.stop()
        detail = said.decode("utf-8", "replace").strip().splitlines()[-1:] or ["it did not answer in time"]
        raise EngineError(f"podman's API service did not start: {detail[0]}", fix=SERVICE_FIX)

    @property
    def started_service(self) -> bool:
        """Whether the API this engine talks to is a service it started (no podman.socket answered)."""
        return self._service is not None

    def close(self) -> None:
        self.stop()

    def stop(self) -> None:
        """End the service this engine started (none: nothing to do)."""
        service, self._service = self._service, None
        if service is not None:
            if service.poll() is None:
                service.terminate()
                try:
                    service.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    service.kill()
                    service.wait()
            if service.stderr is not None:
                service.stderr.close()
        if self._service_dir is not None:
            shutil.rmtree(self._service_dir, ignore_errors=True)
            self._service_dir = None
            self.base_url = None

    def version(self) -> str | None:
        found = super().version()
        return None if found is None else f"podman {found}"

    def info(self) -> dict[str, Any]:
        """The service's `podman info` facts the doctor reports: version and rootless."""
        client = self.client(QUICK_S)
        try:
            version = client.version()
            api = client.api
            libpod = api._result(api._get(api._url("/libpod/info")), json=True)
        except Exception as exc:  # the SDK raises requests' errors too
            raise EngineError(str(exc)[:300], fix=SERVICE_FIX) from None
        finally:
            client.close()
        return {"version": version.get("Version"), "rootless": rootless_of(libpod)}

    def create_container(self, client: Any, image: str, options: dict[str, Any], *, gpu: str | None) -> Any:
        """Without a GPU, the compat API's create, as Docker's. With one, libpod's own create: Podman 4's
        compat API stats a `Devices` entry as a host path and ignores a CDI `DeviceRequest` (both tried
        on 4.3.1), while libpod's takes the CDI name as a device and resolves it from the specs."""
        if gpu is None:
            return client.containers.create(image, **options)
        from envbuild.engine.cdi import ALL_GPUS

        network = "none" if options.get("network_disabled") else str(options.get("network_mode") or "bridge")
        body = {
            "image": image,
            "command": list(options.get("command") or ()),
            "name": options.get("name"),
            "labels": dict(options.get("labels") or {}),
            "env": dict(options.get("environment") or {}),
            "netns": {"nsmode": network},
            "devices": [{"path": ALL_GPUS}],
        }
        api = client.api
        answer = api._result(api._post_json(api._url("/libpod/containers/create"), data=body), json=True)
        return client.containers.get(answer["Id"])

    def build_command(self) -> list[str]:
        """The podman command a build runs: the same storage as the service this engine talks to."""
        cli = podman_cli()
        if not cli:
            raise EngineError("podman is not installed (no podman on PATH)", fix=NO_PODMAN_FIX)
        self._where()
        return [cli, "--remote", "--url", str(self.base_url)] if self.remote else [cli]


def rootless_of(libpod_info: dict[str, Any]) -> bool | None:
    """Whether the service runs rootless, from libpod's own `info` (host.security.rootless); None when
    it does not say. The compat `info` cannot tell: a rootless 4.3.1 service reports the same
    SecurityOptions as a rootful one (both seen here)."""
    host = libpod_info.get("host")
    security = host.get("security") if isinstance(host, dict) else None
    rootless = security.get("rootless") if isinstance(security, dict) else None
    return rootless if isinstance(rootless, bool) else None


def _answers(socket: str) -> bool:
    """Whether a service answers `_ping` on the unix socket `socket` (within VERSION_S)."""
    import socket as sockets

    if not os.path.exists(socket):
        return False
    with contextlib.closing(sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)) as conn:
        conn.settimeout(VERSION_S)
        try:
            conn.connect(socket)
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            return conn.recv(16).startswith(b"HTTP/1.")
        except OSError:
            return False
