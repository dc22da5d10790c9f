"""A real Python package index on loopback, for tests: build small wheels and serve them to pip and uv.

`build_wheel` writes a valid pure-Python wheel (METADATA, WHEEL and a correct RECORD) that pip and uv
install. `PackageIndex` serves a directory of such wheels over HTTP on 127.0.0.1 with the Simple
Repository API, both flavours (PEP 503 HTML and PEP 691 JSON, chosen by the Accept header)::

    with PackageIndex(wheelhouse) as index:
        subprocess.run([..., "--index-url", index.url, "app"])
        assert index.requests["/simple/app/"] == 1

Routes: ``/simple/`` (project list), ``/simple/<project>/`` (the files of one project; a name that is
not normalized, or a missing trailing slash, is redirected to the canonical URL), ``/files/<file>`` (the
bytes). The directory is listed again on every request, so a test may add wheels while the index runs.

`ranges=True` answers Range requests on ``/files/<file>`` as PyPI's file host does (one range,
`bytes=A-B`, `bytes=A-` or `bytes=-N`, sent from disk by sendfile), and says `Accept-Ranges: bytes`: the
way envbuild.refresh reads a remote wheel's members without the rest. Off by default, so pip and uv
see the index they always did.

`core_metadata=True` also serves each wheel's METADATA as PyPI does (PEP 658, named PEP 714's way
too): ``/files/<file>.metadata``, announced on the project page with its sha256. A resolver then
reads a few KB per candidate instead of downloading the wheel: for torch's 200 MB wheel, the
difference between a 2 s lock and a fraction of one, on every lock a test or benchmark runs.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import threading
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, unquote, urlsplit

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPES = ("application/vnd.pypi.simple.v1+html", "text/html")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


TARGET_WHEELS = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:")


def download_for_target(
    directory: Path, *requirements: str, no_deps: bool = False, stderr: int | None = None
) -> Path:
    """`pip download` wheels for the test images' interpreter (CPython 3.11, manylinux_2_28 x86_64),
    whatever the host runs: the wheelhouse the air-gapped builds and the framework indexes use."""
    import subprocess
    import sys

    flags = ["--no-deps"] if no_deps else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            *flags,
            *requirements,
            *TARGET_WHEELS,
            "-d",
            str(directory),
        ],
        check=True,
        stderr=stderr,
    )
    return Path(directory)


def download_uv_for_target(directory: Path) -> Path:
    """uv's manylinux x86_64 wheel, of the version envbuild runs, into `directory`: what an air-gapped
    wheelhouse holds for `[image] installer = "uv"` (its wheels are tagged manylinux_2_17, which pip
    does not take for --platform manylinux_2_28 alone)."""
    import subprocess
    import sys
    from importlib import metadata

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            f"uv=={metadata.version('uv')}",
            *TARGET_WHEELS,
            "--platform",
            "manylinux_2_17_x86_64",
            "-d",
            str(directory),
        ],
        check=True,
    )
    return Path(directory)


def normalize(name: str) -> str:
    """The PEP 503 normalized project name: runs of -, _ and . become one -, lowercased."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(name: str) -> str:
    """The distribution name as the wheel spec writes it in file and directory names."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"sha256={digest}"


def _extra_requirement(requirement: str, extra: str) -> str:
    """`requirement` made conditional on `extra`, keeping any marker it already has."""
    spec, sep, marker = requirement.partition(";")
    if sep and marker.strip():
        return f'{spec.strip()}; ({marker.strip()}) and extra == "{extra}"'
    return f'{spec.strip()}; extra == "{extra}"'


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    requires: Sequence[str] = (),
    extras: dict[str, list[str]] | None = None,
    requires_python: str | None = None,
) -> Path:
    """Write `{name}-{version}-py3-none-any.whl` into `directory` and return its path.

    The wheel holds a module `{name}/__init__.py` (name with underscores) that sets `__version__`, and
    a dist-info with METADATA (2.1: Requires-Dist with markers, Provides-Extra, Requires-Python),
    WHEEL and RECORD (urlsafe-base64 sha256 without padding and sizes; RECORD's own line is empty).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    module = wheel_name(name)
    dist_info = f"{module}-{version}.dist-info"

    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python is not None:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata += [f"Requires-Dist: {requirement}" for requirement in requires]
    for extra, requirements in (extras or {}).items():
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f"Requires-Dist: {_extra_requirement(r, extra)}" for r in requirements]
    wheel = [
        "Wheel-Version: 1.0",
        "Generator: envbuild-tests-pyindex",
        "Root-Is-Purelib: true",
        "Tag: py3-none-any",
    ]
    contents = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{dist_info}/METADATA": ("\n".join(metadata) + "\n\n").encode(),
        f"{dist_info}/WHEEL": ("\n".join(wheel) + "\n").encode(),
    }
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in contents.items()]
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()

    target = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            info = zipfile.ZipInfo(path, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return target


@dataclass(frozen=True)
class IndexFile:
    """One wheel the index serves."""

    filename: str
    project: str  # normalized
    sha256: str  # hex
    requires_python: str | None
    metadata: bytes | None  # the wheel's .dist-info/METADATA, None when it has none


def _read_metadata(path: Path) -> bytes | None:
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            parts = member.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                return archive.read(member)
    return None


def _requires_python(metadata: bytes | None) -> str | None:
    if metadata is None:
        return None
    value = HeaderParser().parsestr(metadata.decode("utf-8")).get("Requires-Python")
    return value.strip() if value else None


def _wants_json(accept: str | None) -> bool:
    """Content negotiation, PEP 691: JSON when the client ranks it at least as high as any HTML type."""
    if not accept:
        return False
    ranks: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranks[media.lower()] = quality
    json_rank = ranks.get(JSON_TYPE, 0.0)
    html_rank = max([ranks.get(t, 0.0) for t in HTML_TYPES] + [ranks.get("*/*", 0.0)])
    return json_rank > 0 and json_rank >= html_rank


class PackageIndex:
    """Serve the wheels in `directory` as a Simple Repository API index on 127.0.0.1 (ephemeral port).

    A context manager (or `start()` / `stop()`). `url` is the index URL to hand to `--index-url`;
    `requests` counts the requests per path (query string dropped) so tests can assert what was fetched.
    `json_api=False` makes it an HTML-only (PEP 503) index that ignores the Accept header;
    `core_metadata` (on unless False) serves each wheel's METADATA beside it (PEP 658 / 714), as PyPI does.
    `ranges` answers Range requests on the files; `bytes_sent` counts the file bytes sent.
    """

    def __init__(
        self, directory: Path, *, json_api: bool = True, core_metadata: bool = True, ranges: bool = False
    ) -> None:
        self.directory = Path(directory)
        self.json_api = json_api
        self.core_metadata = core_metadata
        self.ranges = ranges
        self.bytes_sent = 0
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0  # requests being answered: settle() waits for none
        self._hashes: dict[tuple[str, int, int], tuple[str, bytes | None]] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    def settle(self, timeout: float = 60) -> int:
        """bytes_sent once no request is being answered. A reader can have every byte of an answer
        before the serving thread counts it (sendfile returns after the kernel took the bytes), so
        a count taken right after a read may miss it, or a count taken before the next read may
        include the last one's; tests that measure bytes read settle first."""
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout)
            return self.bytes_sent

    def start(self) -> PackageIndex:
        if self._server is not None:
            raise RuntimeError("index already started")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="pyindex", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def __enter__(self) -> PackageIndex:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("index not started")
        return self._server.server_address[1]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/simple"

    def file_url(self, filename: str) -> str:
        return f"{self.root}/files/{quote(filename)}"

    # -- contents --------------------------------------------------------------------------------------

    def files(self) -> list[IndexFile]:
        """The wheels in the directory now (listed afresh on every call), sorted by file name."""
        found = []
        for path in sorted(self.directory.glob("*.whl")):
            if not path.is_file():
                continue
            stat = path.stat()
            key = (path.name, stat.st_mtime_ns, stat.st_size)
            with self._lock:
                cached = self._hashes.get(key)
            if cached is None:
                cached = (_file_sha256(path), _read_metadata(path))
                with self._lock:
                    self._hashes[key] = cached
            project = normalize(path.name.split("-", 1)[0])
            found.append(IndexFile(path.name, project, cached[0], _requires_python(cached[1]), cached[1]))
        return found

    def projects(self) -> dict[str, list[IndexFile]]:
        grouped: dict[str, list[IndexFile]] = {}
        for item in self.files():
            grouped.setdefault(item.project, []).append(item)
        return dict(sorted(grouped.items()))

    def _count(self, path: str) -> None:
        with self._lock:
            self.requests[path] += 1


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _metadata_hash(item: IndexFile) -> str:
    return hashlib.sha256(item.metadata or b"").hexdigest()


def _make_handler(index: PackageIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "envbuild-pyindex/1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._handle(send_body=True)

        def do_HEAD(self) -> None:
            self._handle(send_body=False)

        # -- routing -----------------------------------------------------------------------------------

        def _handle(self, send_body: bool) -> None:
            with index._lock:
                index._busy += 1
            try:
                self._answer(send_body)
            finally:
                with index._idle:
                    index._busy -= 1
                    index._idle.notify_all()

        def _answer(self, send_body: bool) -> None:
            path = urlsplit(self.path).path
            index._count(path)
            parts = [unquote(p) for p in path.split("/")]
            # "/simple/app/" -> ["", "simple", "app", ""]
            if parts[:2] == ["", "simple"]:
                if len(parts) == 2:
                    return self._redirect("/simple/")
                if len(parts) == 3 and parts[2] == "":
                    return self._project_list(send_body)
                if len(parts) in (3, 4) and parts[2] and (len(parts) == 3 or parts[3] == ""):
                    return self._project(parts[2], send_body)
            elif len(parts) == 3 and parts[1] == "files" and parts[2]:
                return self._file(parts[2], send_body)
            return self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n", send_body)

        def _project_list(self, send_body: bool) -> None:
            projects = list(index.projects())
            if index.json_api and _wants_json(self.headers.get("Accept")):
                payload = {"meta": {"api-version": "1.1"}, "projects": [{"name": p} for p in projects]}
                return self._send(HTTPStatus.OK, JSON_TYPE, json.dumps(payload).encode(), send_body)
            links = "".join(f'    <a href="{quote(p)}/">{html.escape(p)}</a><br/>\n' for p in projects)
            body = _html_page("Simple index", links)
            return self._send(HTTPStatus.OK, HTML_TYPES[0], body, send_body)

        def _project(self, name: str, send_body: bool) -> None:
            project = normalize(name)
            if name != project or not self.path.split("?", 1)[0].endswith("/"):
                return self._redirect(f"/simple/{quote(project)}/")
            files = index.projects().get(project)
            if not files:
                return self._send(HTTPStatus.NOT_FOUND, "text/plain", b"no such project\n", send_body)
            if index.json_api and _wants_json(self.headers.get("Accept")):
                entries = []
                for item in files:
                    entry: dict[str, object] = {
                        "filename": item.filename,
                        "url": index.file_url(item.filename),
                        "hashes": {"sha256": item.sha256},
                    }
                    if item.requires_python is not None:
                        entry["requires-python"] = item.requires_python
                    if index.core_metadata and item.metadata is not None:
                        entry["core-metadata"] = {"sha256": _metadata_hash(item)}
                        entry["dist-info-metadata"] = {"sha256": _metadata_hash(item)}
                    entries.append(entry)
                payload = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
                return self._send(HTTPStatus.OK, JSON_TYPE, json.dumps(payload).encode(), send_body)
            links = []
            for item in files:
                attrs = f'href="../../files/{quote(item.filename)}#sha256={item.sha256}"'
                if item.requires_python is not None:
                    attrs += f' data-requires-python="{html.escape(item.requires_python, quote=True)}"'
                if index.core_metadata and item.metadata is not None:
                    named = f"sha256={_metadata_hash(item)}"
                    attrs += f' data-core-metadata="{named}" data-dist-info-metadata="{named}"'
                links.append(f"    <a {attrs}>{html.escape(item.filename)}</a><br/>\n")
            body = _html_page(f"Links for {html.escape(project)}", "".join(links))
            return self._send(HTTPStatus.OK, HTML_TYPES[0], body, send_body)

        def _file(self, filename: str, send_body: bool) -> None:
            if index.core_metadata and filename.endswith(".whl.metadata"):
                return self._metadata(filename[: -len(".metadata")], send_body)
            if "/" in filename or filename in (".", "..") or not filename.endswith(".whl"):
                return self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n", send_body)
            path = index.directory / filename
            if not path.is_file():
                return self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n", send_body)
            if index.ranges:
                return self._ranged(path, send_body)
            return self._send(HTTPStatus.OK, "application/octet-stream", path.read_bytes(), send_body)

        def _ranged(self, path: Path, send_body: bool) -> None:
            """The file, or the one range the Range header asks for, sent from disk."""
            size = path.stat().st_size
            start, stop, status = 0, size - 1, HTTPStatus.OK
            wanted = self.headers.get("Range")
            if wanted:
                suffix = re.fullmatch(r"bytes=-(\d+)", wanted.strip())
                span = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
                if suffix:
                    start = max(0, size - int(suffix.group(1)))
                elif span and int(span.group(1)) < size:
                    start = int(span.group(1))
                    stop = min(int(span.group(2)) if span.group(2) else size - 1, size - 1)
                else:
                    self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                status = HTTPStatus.PARTIAL_CONTENT
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(stop - start + 1))
            self.send_header("Accept-Ranges", "bytes")
            if status == HTTPStatus.PARTIAL_CONTENT:
                self.send_header("Content-Range", f"bytes {start}-{stop}/{size}")
            self.end_headers()
            if not send_body:
                return None
            with path.open("rb") as handle:  # sendfile: the kernel copies, and no GIL is held
                try:
                    sent = self.connection.sendfile(handle, offset=start, count=stop - start + 1)
                except (BrokenPipeError, ConnectionResetError):  # the reader had what it needed
                    return None
            with index._lock:
                index.bytes_sent += sent
            return None

        def _metadata(self, wheel: str, send_body: bool) -> None:
            found = next((item for item in index.files() if item.filename == wheel), None)
            if found is None or found.metadata is None:
                return self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n", send_body)
            return self._send(HTTPStatus.OK, "application/octet-stream", found.metadata, send_body)

        # -- responses ---------------------------------------------------------------------------------

        def _redirect(self, location: str) -> None:
            self.send_response(HTTPStatus.MOVED_PERMANENTLY)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(self, status: HTTPStatus, content_type: str, body: bytes, send_body: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if send_body:
                self.wfile.write(body)

    return Handler


def _html_page(title: str, body: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        '    <meta name="pypi:repository-version" content="1.1">\n'
        f"    <title>{title}</title>\n  </head>\n  <body>\n    <h1>{title}</h1>\n{body}  </body>\n</html>\n"
    ).encode()
