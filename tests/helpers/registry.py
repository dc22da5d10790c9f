"""Registries for tests: Debian's docker-registry as a real process, and the pieces of the small
in-process registry-shaped HTTP servers some tests use to script an exact answer (a real HTTP server,
not a mock of requests)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import socket
import struct
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
        self,
        status: int,
        body: bytes,
        challenge: str | None = None,
        digest: str | None = None,
        *,
        media_type: str = "application/json",
        echo: str | None = None,
    ) -> None:
        """`echo`: a value sent back in an X-Echo-Authorization header (EchoingRegistry)."""
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        if challenge:
            self.send_header("WWW-Authenticate", challenge)
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        if echo:
            self.send_header("X-Echo-Authorization", echo)
        self.end_headers()
        if self.command != "HEAD":
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


# --- hostile registries: what a proxy or a misconfigured registry does with credentials -------------

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def verified_image(labels: dict[str, str] | None = None) -> tuple[bytes, str, bytes, str]:
    """(manifest bytes, its digest, config bytes, its digest) of a layerless image whose config
    carries `labels` (default: io.envbuild.verified=true), for servers that serve one image."""
    return layerless_image({"config": {"Labels": labels or {"io.envbuild.verified": "true"}}})


def layerless_image(config_document: dict) -> tuple[bytes, str, bytes, str]:
    """(manifest bytes, its digest, config bytes, its digest) of an image with no layers and this
    config: what a registry test needs of an image, without an Engine."""
    config = json.dumps(config_document).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_V2,
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [],
        }
    ).encode()
    return manifest, "sha256:" + hashlib.sha256(manifest).hexdigest(), config, config_digest


class EchoingRegistry(LoopbackServer):
    """A registry that wants HTTP Basic credentials, then refuses every write (and every read but
    /v2/ and its one verified image, x/y@`digest`) with HTTP 400 and an error that echoes the
    Authorization header it was sent: in the error's message, in its detail as a header map and a
    "token" field, and in a response header. That is what some proxies and registries do, and what
    the Engine then relays in a push error. `seen` lists (method, path, Authorization)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.manifest, self.digest, self.config, self.config_digest = verified_image()
        outer = self

        class Handler(RegistryHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.partition("?")[0]
                auth = self.headers.get("Authorization", "")
                outer.seen.append((self.command, path, auth))
                if not auth:
                    body = b'{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}'
                    return self.reply(401, body, challenge='Basic realm="echo"')
                if path == "/v2/":
                    return self.reply(200, b"{}")
                if self.command in ("GET", "HEAD") and path == f"/v2/x/y/manifests/{outer.digest}":
                    return self.reply(200, outer.manifest, digest=outer.digest, media_type=MANIFEST_V2)
                if self.command in ("GET", "HEAD") and path == f"/v2/x/y/blobs/{outer.config_digest}":
                    return self.reply(200, outer.config, digest=outer.config_digest)
                if self.command == "HEAD":  # "no such blob": the Engine goes on to upload it
                    return self.reply(404, b"")
                _, _, credential = auth.partition(" ")
                error = {
                    "code": "DENIED",
                    "message": f"request refused; it carried Authorization: {auth}",
                    "detail": {"Authorization": [auth], "token": credential},
                }
                self.reply(400, json.dumps({"errors": [error]}).encode(), echo=auth)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = answer

        super().__init__(Handler)


class TokenServer(LoopbackServer):
    """A Bearer token service on its own port: it hands out `token` to anyone and records the
    Authorization of every request it got (`seen`), so a test can tell whether credentials reached it."""

    token = "tok-3f9a1c77e2d54b08"

    def __init__(self) -> None:
        self.seen: list[str] = []
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                outer.seen.append(self.headers.get("Authorization", ""))
                self.reply(200, json.dumps({"token": outer.token}).encode())

        super().__init__(Handler)


class ForeignRealmRegistry(LoopbackServer):
    """A registry whose Bearer challenge names `realm` (where "{port}" stands for its own port); it
    serves its one verified image, x/y@`digest`, to the token a TokenServer hands out."""

    def __init__(self, realm: str) -> None:
        self.manifest, self.digest, self.config, self.config_digest = verified_image()
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                path = self.path.partition("?")[0]
                if self.headers.get("Authorization") != f"Bearer {TokenServer.token}":
                    named = realm.replace("{port}", str(outer.port))
                    challenge = f'Bearer realm="{named}",service="test",scope="repository:x/y:pull"'
                    return self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', challenge)
                if path.startswith("/v2/x/y/manifests/"):
                    return self.reply(200, outer.manifest, digest=outer.digest, media_type=MANIFEST_V2)
                if path == f"/v2/x/y/blobs/{outer.config_digest}":
                    return self.reply(200, outer.config, digest=outer.config_digest)
                self.reply(404, b'{"errors": [{"code": "NAME_UNKNOWN"}]}')

        super().__init__(Handler)


# --- a server that answers from a script: rate limits, outages and connection resets ---------------


class ScriptedServer(LoopbackServer):
    """Answers each request with the next step of `script`, then with its last step for good.

    A step is (status, headers) or "reset": the connection is closed with a TCP RST before any answer,
    which is what a load balancer dropping a connection looks like. `seen` lists the paths asked for.
    The 200 answer's body is `body` (a JSON object by default)."""

    def __init__(self, script: list[tuple[int, dict[str, str]] | str], body: bytes = b"{}") -> None:
        self.script = list(script)
        self.seen: list[str] = []
        outer = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                step = outer.script[min(len(outer.seen), len(outer.script) - 1)]
                outer.seen.append(self.path)
                if step == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                status, headers = step  # type: ignore[misc]
                payload = body if status == 200 else b'{"errors": [{"code": "TOOMANYREQUESTS"}]}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        super().__init__(Handler)
        self.server.handle_error = lambda request, address: None  # the reset step's closed socket


# --- docker logins through credential helpers --------------------------------------------------------

HELPER = """#!{python}
# docker-credential-{name}, a stand-in speaking the credential-helper protocol: `get`, the server URL on
# stdin. Each call's arguments and stdin are appended to {name}.calls next to it.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
server = sys.stdin.read()
with open(os.path.join(here, "{name}.calls"), "a") as log:
    log.write(json.dumps([sys.argv[1:], server]) + "\\n")
mode, user, secret = {mode!r}, {user!r}, {secret!r}
if mode == "ok":
    print(json.dumps({{"ServerURL": server.strip(), "Username": user, "Secret": secret}}))
elif mode == "notfound":
    print("credentials not found in native keychain")
    sys.exit(1)
elif mode == "crash":
    print("panic: token " + secret + " for " + user + " expired")
    sys.stderr.write("error getting credentials - err: exit status 2, out: `" + secret + "`\\n")
    sys.exit(2)
else:  # "garbage": exit 0 and something that is not the protocol's JSON
    print("Secret=" + secret)
"""


def write_credential_helper(
    directory: Path, name: str, *, user: str = "", secret: str = "", mode: str = "ok"
) -> Path:
    """An executable docker-credential-`name` in `directory` (put it first on PATH); `mode` is "ok"
    (answers user and secret), "notfound", "crash" (prints the secret, exits 2) or "garbage"."""
    import sys

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"docker-credential-{name}"
    path.write_text(HELPER.format(python=sys.executable, name=name, mode=mode, user=user, secret=secret))
    path.chmod(0o755)
    return path


def helper_calls(directory: Path, name: str) -> list[tuple[list[str], str]]:
    """[(arguments, stdin), ...] of every run of the stand-in helper `name` so far."""
    log = directory / f"{name}.calls"
    if not log.exists():
        return []
    return [tuple(json.loads(line)) for line in log.read_text().splitlines()]  # type: ignore[misc]


def write_config_json(directory: Path, config: dict) -> str:
    """A docker config directory with exactly `config` as its config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def basic_auth(user: str, password: str) -> str:
    """The `auth` value of a docker config's `auths` entry."""
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def start_htpasswd_registry(directory: Path, user: str, password: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Debian's docker-registry wanting HTTP basic `user`:`password` (an htpasswd file, bcrypt)."""
    import bcrypt

    directory.mkdir(parents=True, exist_ok=True)
    htpasswd = directory / "htpasswd"
    htpasswd.write_bytes(user.encode() + b":" + bcrypt.hashpw(password.encode(), bcrypt.gensalt()) + b"\n")
    auth_yaml = f"auth:\n  htpasswd:\n    realm: envbuild-test\n    path: {htpasswd}\n"
    return start_registry(directory / "registry", auth_yaml)


def upload_image(host: str, repo: str, tag: str, auth: tuple[str, str] | None = None) -> str:
    """Put verified_image()'s layerless image as `repo:tag` over the registry API (no Engine needed);
    its manifest digest."""
    manifest, digest, config, config_digest = verified_image()
    started = requests.post(f"http://{host}/v2/{repo}/blobs/uploads/", auth=auth, timeout=10)
    assert started.status_code == 202, started.text
    location = started.headers["Location"]
    url = location if "://" in location else f"http://{host}{location}"
    put = requests.put(url, params={"digest": config_digest}, data=config, auth=auth, timeout=10)
    assert put.status_code == 201, put.text
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{tag}",
        data=manifest,
        headers={"Content-Type": MANIFEST_V2},
        auth=auth,
        timeout=10,
    )
    assert stored.status_code == 201, stored.text
    return digest


class OneImageRegistry(LoopbackServer):
    """An anonymous registry holding one layerless image, x/y@`digest`, whose config carries `labels`
    (none by default: an image envbuild never verified); it takes manifest PUTs. `seen` lists
    (method, path) of every request and `puts` the (path, body) of every manifest written, so a test
    proves that a refused promotion wrote no tag."""

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        self.seen: list[tuple[str, str]] = []
        self.puts: list[tuple[str, bytes]] = []
        self.manifest, self.digest, self.config, self.config_digest = verified_image(labels or {"x": "y"})
        outer = self

        class Handler(RegistryHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.partition("?")[0]
                outer.seen.append((self.command, path))
                if path == "/v2/":
                    return self.reply(200, b"{}")
                if self.command == "PUT" and path.startswith("/v2/x/y/manifests/"):
                    outer.puts.append((path, body))
                    return self.reply(201, b"", digest="sha256:" + hashlib.sha256(body).hexdigest())
                if path == f"/v2/x/y/manifests/{outer.digest}":
                    return self.reply(200, outer.manifest, digest=outer.digest, media_type=MANIFEST_V2)
                if path == f"/v2/x/y/blobs/{outer.config_digest}":
                    return self.reply(200, outer.config, digest=outer.config_digest)
                self.reply(404, b'{"errors": [{"code": "NAME_UNKNOWN"}]}')

            do_GET = do_HEAD = do_PUT = answer

        super().__init__(Handler)

    @property
    def ref(self) -> str:
        """The image by digest: what `envbuild promote REF --to TAG` takes."""
        return f"{self.host}/x/y@{self.digest}"


OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def upload_index(
    host: str, repo: str, tag: str, platforms: tuple[str, ...], *, index: bool = True
) -> tuple[str, dict[str, str]]:
    """Put a multi-platform image as `repo:tag` over the registry API (no Engine needed): one
    layerless image per platform ("linux/arm64", or with a variant, "linux/arm64/v8"), its config
    naming that os and architecture, and an OCI image index listing them, with the variant in the
    entry's platform as buildx writes it. (the index's digest, {platform: its manifest's digest}).
    `index=False` with one platform tags that image's manifest itself: a single-platform image."""
    manifests = {}
    for platform in platforms:
        os_name, architecture = platform.split("/")[:2]
        manifest, digest, config, config_digest = layerless_image(
            {"architecture": architecture, "os": os_name, "config": {"Labels": {}}}
        )
        started = requests.post(f"http://{host}/v2/{repo}/blobs/uploads/", timeout=10)
        assert started.status_code == 202, started.text
        location = started.headers["Location"]
        url = location if "://" in location else f"http://{host}{location}"
        put = requests.put(url, params={"digest": config_digest}, data=config, timeout=10)
        assert put.status_code == 201, put.text
        stored = requests.put(
            f"http://{host}/v2/{repo}/manifests/{digest}",
            data=manifest,
            headers={"Content-Type": MANIFEST_V2},
            timeout=10,
        )
        assert stored.status_code == 201, stored.text
        manifests[platform] = (digest, len(manifest))
        if not index:
            tagged = requests.put(
                f"http://{host}/v2/{repo}/manifests/{tag}",
                data=manifest,
                headers={"Content-Type": MANIFEST_V2},
                timeout=10,
            )
            assert tagged.status_code == 201, tagged.text
            return digest, {platform: digest}
    document = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": MANIFEST_V2,
                    "digest": digest,
                    "size": size,
                    "platform": dict(zip(("os", "architecture", "variant"), p.split("/"), strict=False)),
                }
                for p, (digest, size) in manifests.items()
            ],
        }
    ).encode()
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{tag}",
        data=document,
        headers={"Content-Type": OCI_INDEX},
        timeout=10,
    )
    assert stored.status_code == 201, stored.text
    return "sha256:" + hashlib.sha256(document).hexdigest(), {p: d for p, (d, _) in manifests.items()}


def index_over_pushed(host: str, repo: str, tag: str, tags_by_platform: dict[str, str]) -> dict[str, str]:
    """Tag `repo:tag` in the registry as an OCI image index over images already pushed there (one tag
    per platform, e.g. {"linux/arm64": "arm64"}), as a multi-arch base like nvidia/cuda is published.
    Returns {platform: its manifest's digest}."""
    accept = (
        "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    )
    entries, digests = [], {}
    for platform, child in tags_by_platform.items():
        got = requests.get(
            f"http://{host}/v2/{repo}/manifests/{child}", headers={"Accept": accept}, timeout=30
        )
        assert got.status_code == 200, got.text
        os_name, architecture = platform.split("/")
        digests[platform] = got.headers["Docker-Content-Digest"]
        entries.append(
            {
                "mediaType": got.headers["Content-Type"].split(";")[0],
                "digest": digests[platform],
                "size": len(got.content),
                "platform": {"os": os_name, "architecture": architecture},
            }
        )
    index = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}
    ).encode()
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{tag}",
        data=index,
        headers={"Content-Type": "application/vnd.oci.image.index.v1+json"},
        timeout=30,
    )
    assert stored.status_code == 201, stored.text
    return digests
