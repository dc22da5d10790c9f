"""Issue 33, the registry surface: a hostile registry on loopback, and the real CLI against it.

A 1.5 GiB manifest exhausted memory (`response.content`), a registry sending one byte every 20 s held
`audit` for ever (requests' timeout is per read), wrongly shaped manifests crashed with
AttributeError/TypeError, and a tag was pinned to whatever Docker-Content-Digest said. Each case here
starts a real HTTP server on 127.0.0.1 (threaded http.server, speaking as much of the OCI
distribution API as the command reads: manifests, blobs, referrers) that is huge, slow, malformed,
redirecting or lying, runs `envbuild audit` or `envbuild attest` on it in a subprocess (a loopback
registry is spoken to over plain http, as docs/concepts/trust-model.md says), and asserts the error text,
the exit code, no traceback or internal error, a bound in bytes (what the server managed to send, counted
by the server) and that nothing is left in the temporary or cache directories. No wall-clock assertion:
the slow case asserts the deadline's error text and the bytes sent.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envbuild._util import limits

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/train"
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
MIB = 1 << 20
BLOCK = 64 * 1024
SERVER_CAP = 1 << 30  # an endless answer stops here, so a client without a bound fails the byte check
SLACK = 16 * MIB  # what loopback socket buffers can take in beyond what the client reads


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def document(value: object) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


CONFIG = document({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]}})
CONFIG_DESCRIPTOR = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest_of(CONFIG)}


def image_manifest(**fields: object) -> bytes:
    manifest: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {**CONFIG_DESCRIPTOR, "size": len(CONFIG)},
        "layers": [],
    }
    manifest.update(fields)
    return document(manifest)


Route = Callable[["_Handler"], None]


class Hostile:
    """The registry: a route per path ("/v2/acme/train/manifests/sha256:..."), the bytes of body it
    managed to send (socket writes that returned), and whether every handler has returned."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.sent = 0
        self.busy = 0
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.hostile = self  # type: ignore[attr-defined]
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def route(self, path: str, answer: Route) -> None:
        self.routes[f"/v2/{REPO}/{path}"] = answer

    def manifest(self, body: bytes, *, media_type: str = MANIFEST, header: str | None = None) -> str:
        """Serve `body` as the manifest of its own digest (and of the tag "v1"); its digest."""
        digest = digest_of(body)
        answer = json_answer(body, media_type=media_type, header=digest if header is None else header)
        self.route(f"manifests/{digest}", answer)
        self.route("manifests/v1", answer)
        return digest

    def settle(self) -> int:
        """The bytes sent, once every handler has returned (the client's end is closed by then)."""
        with self.idle:
            self.idle.wait_for(lambda: self.busy == 0, timeout=10)
            return self.sent


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK wait)

    def log_message(self, *args: object) -> None:
        pass

    @property
    def hostile(self) -> Hostile:
        return self.server.hostile  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        hostile = self.hostile
        with hostile.lock:
            hostile.busy += 1
        try:
            answer = hostile.routes.get(self.path.split("?", 1)[0])
            if answer is None:
                json_answer(document({"errors": [{"code": "NAME_UNKNOWN"}]}), status=404)(self)
            else:
                answer(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            with hostile.idle:
                hostile.busy -= 1
                hostile.idle.notify_all()

    do_HEAD = do_GET

    def write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()
        with self.hostile.lock:
            self.hostile.sent += len(data)


def json_answer(
    body: bytes,
    *,
    status: int = 200,
    media_type: str = "application/json",
    header: str | None = None,
    encoding: str | None = None,
) -> Route:
    def answer(handler: _Handler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", media_type)
        if encoding:
            handler.send_header("Content-Encoding", encoding)
        handler.send_header("Content-Length", str(len(body)))
        if header:
            handler.send_header("Docker-Content-Digest", header)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.write(body)

    return answer


def endless(*, claim: int | None = None, head: bytes = b"", status: int = 200, location: str = "") -> Route:
    """An answer that never ends: `head`, then zeros, chunked (or with a Content-Length of `claim`),
    until the client goes away (or SERVER_CAP)."""

    def answer(handler: _Handler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/octet-stream")
        if location:
            handler.send_header("Location", location)
        if claim is None:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(claim))
        handler.end_headers()
        block, first, sent = bytes(BLOCK), head, 0
        while sent < SERVER_CAP:
            data = first + block[len(first) :]
            first = b""
            handler.write(data if claim is not None else b"%x\r\n%s\r\n" % (len(data), data))
            sent += len(data)
        handler.close_connection = True

    return answer


def slow(body: bytes, every_s: float = 0.2) -> Route:
    """The body with its Content-Length, one byte every `every_s` seconds."""

    def answer(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", MANIFEST)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for offset in range(len(body)):
            handler.write(body[offset : offset + 1])
            time.sleep(every_s)

    return answer


def slow_headers(every_s: float = 0.2) -> Route:
    """A status line and headers that never end, one byte every `every_s` seconds: each byte resets
    requests' per-read timeout, so only a deadline on the whole answer stops it."""

    def answer(handler: _Handler) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: " + MANIFEST.encode() + b"\r\nX-Padding: " + b"p" * 4000
        for offset in range(len(head)):
            handler.write(head[offset : offset + 1])
            time.sleep(every_s)

    return answer


def redirect_to(location: str) -> Route:
    def answer(handler: _Handler) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    registry = Hostile()
    thread = threading.Thread(target=registry.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield registry
    registry.server.shutdown()
    registry.server.server_close()


class Run:
    """The CLI run in a subprocess with its own HOME, TMPDIR and cache; `left` lists what it left."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp, self.cache, self.home = tmp_path / "tmp", tmp_path / "cache", tmp_path / "home"
        for directory in (self.tmp, self.cache, self.home, tmp_path / "docker"):
            directory.mkdir()
        self.work = tmp_path
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "ENVBUILD_CACHE_DIR": str(self.cache),
            "XDG_CACHE_HOME": str(self.cache),
            "DOCKER_CONFIG": str(tmp_path / "docker"),
        }

    def __call__(self, *args: str, **env: str) -> tuple[int, str]:
        done = subprocess.run(
            [sys.executable, "-m", "envbuild", *args],
            cwd=self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, done.stdout + done.stderr

    def left(self) -> list[str]:
        files = [
            path
            for path in self.cache.rglob("*")
            if not path.is_dir() and not path.name.startswith("matrix-")  # the parsed matrix, kept by design
        ]
        return sorted(str(path.relative_to(self.work)) for path in [*files, *self.tmp.iterdir()])


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def refused(code: int, output: str, run: Run, *texts: str, exit_code: int = 1) -> None:
    assert code == exit_code, output
    assert "Traceback" not in output and "internal error" not in output, output
    assert "error: " in output and "fix: " in output, output
    for text in texts:
        assert text in output, output
    assert run.left() == [], run.left()


def audit(hostile: Hostile, digest: str) -> tuple[str, ...]:
    return ("audit", f"{hostile.host}/{REPO}@{digest}", "--gpu", "H100")


ANY = "sha256:" + "ab" * 32


# --- huge ---------------------------------------------------------------------------------------


def test_a_manifest_claiming_one_and_a_half_gib_is_refused_before_its_body(
    hostile: Hostile, run: Run
) -> None:
    hostile.route(f"manifests/{ANY}", endless(claim=3 * (1 << 29)))
    code, output = run(*audit(hostile, ANY))
    refused(
        code, output, run, f"the manifest {hostile.host}/{REPO}@{ANY}", "larger than envbuild reads (4 MiB)"
    )
    assert hostile.settle() < limits.MANIFEST_BYTES.get() + SLACK


def test_an_endless_chunked_manifest_stops_at_the_manifest_limit(hostile: Hostile, run: Run) -> None:
    hostile.route(f"manifests/{ANY}", endless())
    code, output = run(*audit(hostile, ANY))
    refused(code, output, run, "larger than envbuild reads (4 MiB)")
    sent = hostile.settle()
    assert limits.MANIFEST_BYTES.get() < sent < limits.MANIFEST_BYTES.get() + SLACK


def _tar_head() -> bytes:
    """A tar header for a 7 GiB file: what follows is its (endless) content."""
    member = tarfile.TarInfo("usr/lib/big.bin")
    member.size = 7 << 30
    return member.tobuf(format=tarfile.USTAR_FORMAT)


def test_an_endless_layer_stops_at_the_size_its_manifest_declares_and_leaves_nothing(
    hostile: Hostile, run: Run
) -> None:
    layer = "sha256:" + "cd" * 32
    digest = hostile.manifest(image_manifest(layers=[{"mediaType": LAYER, "digest": layer, "size": 8 * MIB}]))
    hostile.route(f"blobs/{layer}", endless(head=_tar_head()))
    code, output = run(*audit(hostile, digest))
    refused(
        code, output, run, f"layer {layer} of {hostile.host}/{REPO}", "larger than envbuild reads (8 MiB)"
    )
    sent = hostile.settle()
    assert 8 * MIB < sent < 8 * MIB + SLACK


def test_a_layer_declaring_more_than_the_layer_bound_is_refused_unread(hostile: Hostile, run: Run) -> None:
    layer = "sha256:" + "ce" * 32
    digest = hostile.manifest(image_manifest(layers=[{"mediaType": LAYER, "digest": layer, "size": 8 * MIB}]))
    hostile.route(f"blobs/{layer}", endless(head=_tar_head()))
    code, output = run(*audit(hostile, digest), ENVBUILD_MAX_LAYER_BYTES=str(MIB))
    refused(code, output, run, f"layer {layer} of {hostile.host}/{REPO} declares 8 MiB", "(1 MiB)")
    assert "ENVBUILD_MAX_LAYER_BYTES" in output
    assert hostile.settle() < SLACK  # at most what the server pushed before envbuild hung up


# --- slow ---------------------------------------------------------------------------------------


def test_a_registry_sending_a_byte_every_fifth_of_a_second_meets_the_deadline(
    hostile: Hostile, run: Run
) -> None:
    body = image_manifest(annotations={"padding": "x" * 4000})
    hostile.route(f"manifests/{ANY}", slow(body))
    code, output = run(*audit(hostile, ANY), ENVBUILD_HTTP_DEADLINE_S="1")
    refused(code, output, run, "did not arrive within 1 s", "ENVBUILD_HTTP_DEADLINE_S")
    assert hostile.settle() < 200  # about five bytes came in the second it had, never the 4 KiB


def test_a_registry_trickling_its_headers_meets_the_deadline_too(hostile: Hostile, run: Run) -> None:
    hostile.route(f"manifests/{ANY}", slow_headers())
    code, output = run(*audit(hostile, ANY), ENVBUILD_HTTP_DEADLINE_S="1")
    refused(code, output, run, "the server's answer did not begin within 1 s", "ENVBUILD_HTTP_DEADLINE_S")
    assert hostile.settle() < 200  # a few header bytes, never the 4 KiB of them


# --- malformed ----------------------------------------------------------------------------------

CHILD = "sha256:" + "ef" * 32

SHAPES = {
    "manifests is a number": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": 5},
        INDEX,
        "'manifests' is the number 5, not a list",
    ),
    "platform is a string": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [{"digest": CHILD, "platform": "linux/amd64"}]},
        INDEX,
        "'manifests[0].platform' is the string 'linux/amd64', not a JSON object",
    ),
    "an index entry is a string": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": ["sha256:x"]},
        INDEX,
        "'manifests[0]' is the string 'sha256:x', not a JSON object",
    ),
    "layers is an object": (
        json.loads(image_manifest(layers={})),
        MANIFEST,
        "'layers' is an object, not a list",
    ),
    "a layer without a string digest": (
        json.loads(image_manifest(layers=[{"mediaType": LAYER, "digest": 5}])),
        MANIFEST,
        "'layers[0].digest' is the number 5, not a digest",
    ),
    "a layer without any digest": (
        json.loads(image_manifest(layers=[{"mediaType": LAYER}])),
        MANIFEST,
        "'layers[0].digest' is missing",
    ),
    "size is a string": (
        json.loads(image_manifest(layers=[{"mediaType": LAYER, "digest": CHILD, "size": "x"}])),
        MANIFEST,
        "'layers[0].size' is the string 'x', not a whole number of bytes",
    ),
    "config is a list": (
        json.loads(image_manifest(config=[])),
        MANIFEST,
        "'config' is a list, not a JSON object",
    ),
    "annotations is a number": (
        json.loads(image_manifest(annotations=3)),
        MANIFEST,
        "'annotations' is the number 3, not an object of strings",
    ),
    "the manifest is a list": ([1, 2], MANIFEST, "it is a list, not a JSON object"),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_wrongly_shaped_manifest_is_a_clear_error_naming_the_field(
    hostile: Hostile, run: Run, case: str
) -> None:
    value, media_type, why = SHAPES[case]
    digest = hostile.manifest(document(value), media_type=media_type)
    code, output = run(*audit(hostile, digest))
    refused(code, output, run, f"the manifest {digest} of {hostile.host}/{REPO} is malformed", why)


REFERRERS = {
    "manifests is a number": ({"schemaVersion": 2, "mediaType": INDEX, "manifests": 5}, "is not a list"),
    "annotations is a number": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [{"digest": CHILD, "annotations": 3}]},
        "'manifests[0].annotations' is the number 3, not an object of strings",
    ),
    "size is a string": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [{"digest": CHILD, "size": "x"}]},
        "'manifests[0].size' is the string 'x', not a whole number of bytes",
    ),
    "an entry without a digest": (
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [{"artifactType": "x"}]},
        "'manifests[0].digest' is missing",
    ),
}


@pytest.mark.parametrize("case", sorted(REFERRERS))
def test_a_wrongly_shaped_referrers_list_is_a_clear_error(hostile: Hostile, run: Run, case: str) -> None:
    value, why = REFERRERS[case]
    subject = hostile.manifest(image_manifest())
    hostile.route(f"referrers/{subject}", json_answer(document(value), media_type=INDEX))
    code, output = run("attest", f"{hostile.host}/{REPO}@{subject}")
    refused(code, output, run, f"the referrers of {hostile.host}/{REPO}@{subject}", why)


def test_a_config_blob_of_the_wrong_shape_is_a_clear_error(hostile: Hostile, run: Run) -> None:
    config = document({"architecture": "amd64", "os": "linux", "config": {"Labels": 5}})
    manifest = image_manifest(config={**CONFIG_DESCRIPTOR, "digest": digest_of(config), "size": len(config)})
    subject = hostile.manifest(manifest)
    hostile.route(f"blobs/{digest_of(config)}", json_answer(config))
    hostile.route(f"referrers/{subject}", json_answer(document({"schemaVersion": 2, "manifests": []})))
    code, output = run("attest", f"{hostile.host}/{REPO}@{subject}")
    refused(code, output, run, f"the config blob {digest_of(config)}", "'config.Labels' is the number 5")


# --- redirecting --------------------------------------------------------------------------------


def test_a_redirect_loop_is_a_clear_error(hostile: Hostile, run: Run) -> None:
    hostile.route(f"manifests/{ANY}", redirect_to(f"/v2/{REPO}/manifests/{ANY}"))
    code, output = run(*audit(hostile, ANY))
    refused(code, output, run, "redirected more than 30 times (a redirect loop)", hostile.host)


def test_a_redirect_whose_body_never_ends_is_never_read(hostile: Hostile, run: Run) -> None:
    """requests reads each redirect's whole body before it follows it: an endless one held it for
    ever. envbuild follows redirects itself and never reads their bodies."""
    hostile.route(f"manifests/{ANY}", endless(status=302, location=f"/v2/{REPO}/manifests/{ANY}"))
    code, output = run(*audit(hostile, ANY))
    refused(code, output, run, "redirected more than 30 times (a redirect loop)")
    assert hostile.settle() < 31 * SLACK  # a reader of the bodies would take SERVER_CAP of the first


# --- lying --------------------------------------------------------------------------------------


def test_a_tag_whose_digest_header_lies_is_refused(hostile: Hostile, run: Run) -> None:
    body = image_manifest()
    hostile.manifest(body, header=ANY)
    code, output = run("attest", f"{hostile.host}/{REPO}:v1")
    refused(
        code,
        output,
        run,
        f"served {hostile.host}/{REPO}:v1 with Docker-Content-Digest {ANY}",
        f"the manifest it sent has digest {digest_of(body)}",
    )


def test_a_manifest_by_digest_whose_digest_header_lies_is_refused(hostile: Hostile, run: Run) -> None:
    digest = hostile.manifest(image_manifest(), header=ANY)
    code, output = run(*audit(hostile, digest))
    refused(code, output, run, f"with Docker-Content-Digest {ANY}")


def test_a_blob_that_is_not_its_digest_is_refused(hostile: Hostile, run: Run) -> None:
    subject = hostile.manifest(image_manifest())
    hostile.route(f"blobs/{CONFIG_DESCRIPTOR['digest']}", json_answer(b'{"os": "linux"}'))
    hostile.route(f"referrers/{subject}", json_answer(document({"schemaVersion": 2, "manifests": []})))
    code, output = run("attest", f"{hostile.host}/{REPO}@{subject}")
    refused(code, output, run, f"blob {CONFIG_DESCRIPTOR['digest']} of {hostile.host}/{REPO} does not match")


def test_a_wellformed_registry_is_read(hostile: Hostile, run: Run) -> None:
    """The control: the same server with honest answers, an image of one empty layer, audits."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(tarfile.TarInfo("etc/hostname"), io.BytesIO(b""))
    layer = buffer.getvalue()
    hostile.route(f"blobs/{digest_of(layer)}", json_answer(layer, media_type=LAYER))
    digest = hostile.manifest(
        image_manifest(layers=[{"mediaType": LAYER, "digest": digest_of(layer), "size": len(layer)}])
    )
    code, output = run(*audit(hostile, digest))
    assert "Traceback" not in output and "internal error" not in output and "error:" not in output, output
    assert code in (0, 1), output
    assert run.left() == []


def test_a_redirect_to_another_host_carries_no_credentials(hostile: Hostile, run: Run) -> None:
    """Registries send blobs from storage elsewhere (a 307 to S3). envbuild follows redirects itself
    now (requests read their bodies), so it must do what requests did: the registry's Authorization
    goes to the registry only. A registry that redirects to a host of its choosing gets no token."""
    storage = Hostile()
    threading.Thread(target=storage.server.serve_forever, args=(0.05,), daemon=True).start()
    seen: list[str] = []
    layer = tarfile.TarInfo("etc/hostname").tobuf() + bytes(1024)

    def stored(handler: _Handler) -> None:
        seen.append(handler.headers.get("Authorization", ""))
        json_answer(layer, media_type=LAYER)(handler)

    storage.routes[f"/blob/{digest_of(layer)}"] = stored
    body = image_manifest(layers=[{"mediaType": LAYER, "digest": digest_of(layer), "size": len(layer)}])
    realm = f"http://{hostile.host}/token"

    def guarded(answer: Route) -> Route:
        def check(handler: _Handler) -> None:
            if handler.headers.get("Authorization") != "Bearer secret-token":
                challenge = f'Bearer realm="{realm}",service="test",scope="repository:{REPO}:pull"'
                handler.send_response(401)
                handler.send_header("WWW-Authenticate", challenge)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            answer(handler)

        return check

    hostile.routes["/token"] = json_answer(document({"token": "secret-token"}))
    hostile.route(f"manifests/{digest_of(body)}", guarded(json_answer(body, media_type=MANIFEST)))
    location = f"http://{storage.host}/blob/{digest_of(layer)}"
    hostile.route(f"blobs/{digest_of(layer)}", guarded(redirect_to(location)))
    try:
        code, output = run(*audit(hostile, digest_of(body)))
    finally:
        storage.server.shutdown()
        storage.server.server_close()
    assert "Traceback" not in output and "error:" not in output, output
    assert code == 0, output
    assert seen == [""]  # the layer came from storage, and no token went with it
    assert run.left() == []


def test_a_config_whose_user_is_not_a_string_is_a_clear_error(hostile: Hostile) -> None:
    """The runtimes (Apptainer, Enroot, Charliecloud) take an image by digest and read its config's
    User and Env from the registry (oci.registry.image_config): a User of 0 (a number) is refused
    naming the field, where it reached numeric_user as it came."""
    from envbuild.errors import EnvbuildError
    from envbuild.oci.registry import image_config

    config = document({"architecture": "amd64", "os": "linux", "config": {"User": 0}})
    hostile.route(f"blobs/{digest_of(config)}", json_answer(config))
    digest = hostile.manifest(
        image_manifest(config={**CONFIG_DESCRIPTOR, "digest": digest_of(config), "size": len(config)})
    )
    with pytest.raises(EnvbuildError) as caught:
        image_config(f"{hostile.host}/{REPO}@{digest}")
    assert (
        f"the config blob {digest_of(config)} of {hostile.host}/{REPO} is malformed" in caught.value.message
    )
    assert "'config.User' is the number 0, not a string" in caught.value.message


def test_a_gzip_layer_labelled_content_encoding_gzip_is_hashed_as_stored(hostile: Hostile, run: Run) -> None:
    """Storage that labels a gzip layer `Content-Encoding: gzip` (an S3 object's metadata) sends the
    stored bytes: the digest names them, so the layer reader must not undo the encoding (the tar
    inside would not match), while a manifest or config is decoded as requests always did."""
    import gzip

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(tarfile.TarInfo("etc/hostname"), io.BytesIO(b""))
    layer = gzip.compress(buffer.getvalue())
    hostile.route(
        f"blobs/{digest_of(layer)}", json_answer(layer, media_type=LAYER + "+gzip", encoding="gzip")
    )
    digest = hostile.manifest(
        image_manifest(
            layers=[{"mediaType": LAYER + "+gzip", "digest": digest_of(layer), "size": len(layer)}]
        )
    )
    code, output = run(*audit(hostile, digest))
    assert "error:" not in output and code == 0, output


def test_a_tag_list_whose_next_page_never_ends_is_cut_off(hostile: Hostile) -> None:
    """`matrix refresh` lists a repository's tags page by page (Link: rel=next): a registry naming a
    new next page for ever is stopped at TAG_PAGES pages, each page bounded."""
    from envbuild.errors import EnvbuildError
    from envbuild.oci.registry import TAG_PAGES, list_tags

    pages: list[str] = []

    def page(handler: _Handler) -> None:
        pages.append(handler.path)
        body = document({"name": REPO, "tags": [f"t{len(pages)}"]})
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Link", f'</v2/{REPO}/tags/list?n=1000&last=t{len(pages)}>; rel="next"')
        handler.end_headers()
        handler.write(body)

    hostile.route("tags/list", page)
    with pytest.raises(EnvbuildError) as caught:
        list_tags(f"{hostile.host}/{REPO}")
    assert f"the tag list of {hostile.host}/{REPO} goes on past {TAG_PAGES} pages" in caught.value.message
    assert len(pages) == TAG_PAGES
