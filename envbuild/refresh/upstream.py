"""Reading upstream package indexes over HTTP for `envbuild matrix refresh`.

Everything here answers with plain data or a short EnvbuildError naming the URL, so the refresh
never writes anything on a network failure or a malformed answer. Base URLs are settings, so the
tests point the same code at recorded answers served on 127.0.0.1. Every body is read with
envbuild._util.httpbody (issue 33): a JSON answer within DOCUMENT_BYTES, a range within the bytes
asked for, a whole wheel within DOWNLOAD_BYTES, each within HTTP_DEADLINE_S, never `response.content`.
"""

from __future__ import annotations

import io
import re
import time
import zipfile

from envbuild._util import httpbody, limits
from envbuild._util.http import short_reason, with_retries
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import EnvbuildError, NotFound

if TYPE_CHECKING:
    import requests

PEP691_JSON = "application/vnd.pypi.simple.v1+json"
RANGE_BLOCK = 256 * 1024  # bytes per range request; a wheel's central directory fits in one or two


class Http:
    """One requests session with retries on connection errors, timeouts and 5xx answers."""

    def __init__(self, *, timeout: float = 30, retries: int = 2) -> None:
        import requests

        self.session = requests.Session()
        self.session.headers["User-Agent"] = "envbuild-matrix-refresh"
        self.timeout = timeout
        self.retries = max(0, retries)
        self.bytes_read = 0

    def get(
        self, url: str, *, headers: dict[str, str] | None = None, stream: bool = False
    ) -> requests.Response:

        def unreachable(attempts: int, exc: BaseException) -> EnvbuildError:
            return EnvbuildError(
                f"{url} is unreachable after {attempts} attempt(s): {short_reason(exc)}",
                fix="check the network, proxy and the base URL setting (--pypi-url, "
                "--pytorch-index-url, --cuda-repository), then run the refresh again",
            )

        return with_retries(
            lambda: httpbody.answered(
                lambda: self.session.get(url, headers=headers, timeout=self.timeout, stream=stream), url=url
            ),
            retries=self.retries,
            unreachable=unreachable,
        )

    def json(self, url: str, *, accept: str = "application/json") -> object:
        started = time.monotonic()
        response = self.get(url, headers={"Accept": accept}, stream=True)
        if response.status_code == 404:
            response.close()
            raise NotFound(f"{url} answered 404 Not Found", fix="check the name and the base URL setting")
        if response.status_code != 200:
            response.close()
            raise EnvbuildError(
                f"{url} answered HTTP {response.status_code}",
                fix="retry later; if it persists, check the base URL setting and the service's status",
            )
        body = httpbody.read(response, what="an index answer", limit=limits.DOCUMENT_BYTES, started=started)
        self.bytes_read += len(body)
        try:
            return parse_json(body)
        except ValueError:
            raise malformed(url, "the body is not JSON") from None


def malformed(url: str, why: str) -> EnvbuildError:
    return EnvbuildError(
        f"malformed response from {url}: {why}",
        fix="nothing was written; retry later, and if it persists report the upstream change "
        "(envbuild's refresh reads the documented format only)",
    )


# ---------------------------------------------------------------------------------------------
# PyPI JSON API and PEP 691 simple indexes


class DistFile(Record):
    __slots__ = ("filename", "url", "requires_python", "yanked", "sha256")
    filename: str
    url: str
    requires_python: str | None
    yanked: bool
    sha256: str | None  # the index's digest: names the exact file an audited arch list came from


def pypi_releases(http: Http, base: str, project: str) -> dict[str, list[DistFile]]:
    """version -> files, from the PyPI JSON API (GET /pypi/<project>/json)."""
    url = f"{base.rstrip('/')}/pypi/{project}/json"
    data = http.json(url)
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise malformed(url, "no 'releases' object")
    parsed: dict[str, list[DistFile]] = {}
    for version, files in releases.items():
        if not isinstance(files, list):
            raise malformed(url, f"release {version!r} is not a list of files")
        parsed[version] = [_dist_file(url, f) for f in files]
    return parsed


def _dist_file(where: str, entry: object) -> DistFile:
    if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
        raise malformed(where, "a file entry has no 'filename'")
    file_url = entry.get("url")
    if not isinstance(file_url, str) or not file_url:
        raise malformed(where, f"file {entry['filename']!r} has no 'url'")
    from urllib.parse import urljoin

    file_url = urljoin(where, file_url)  # mirrors answer with URLs relative to the page
    yanked = entry.get("yanked", False)
    requires = entry.get("requires_python", entry.get("requires-python"))
    digests = entry.get("digests", entry.get("hashes"))  # JSON API: digests; PEP 691: hashes
    sha256 = digests.get("sha256") if isinstance(digests, dict) else None
    return DistFile(
        filename=entry["filename"],
        url=file_url,
        requires_python=requires if isinstance(requires, str) else None,
        yanked=bool(yanked),
        sha256=sha256 if isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256) else None,
    )


def simple_index_files(http: Http, index: str, project: str) -> list[DistFile] | None:
    """The files of one project on a PEP 691 JSON simple index; None when it is not there."""
    url = f"{index.rstrip('/')}/{project}/"
    try:
        data = http.json(url, accept=PEP691_JSON)
    except NotFound:
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise malformed(url, "no 'files' list (is it a PEP 691 JSON index?)")
    return [_dist_file(url, entry) for entry in files]


# ---------------------------------------------------------------------------------------------
# wheel METADATA without downloading the wheel


class _RangeReader(io.RawIOBase):
    """A seekable file over HTTP range requests, so zipfile reads only the central directory and
    the METADATA member of a wheel (pip's "lazy wheel" idea)."""

    def __init__(self, http: Http, url: str, size: int, tail: bytes) -> None:
        super().__init__()
        self.http, self.url, self.size, self.position = http, url, size, 0
        self.tail_start, self.tail = size - len(tail), tail
        self.blocks: dict[int, bytes] = {}  # block start -> bytes, aligned to RANGE_BLOCK

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        end = min(self.position + len(buffer), self.size)
        if end <= self.position:
            return 0
        data = self._read(self.position, end)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)

    def _read(self, start: int, end: int) -> bytes:
        if start >= self.tail_start:
            return self.tail[start - self.tail_start : end - self.tail_start]
        first = start - start % RANGE_BLOCK
        chunks = []
        for position in range(first, end, RANGE_BLOCK):
            if position not in self.blocks:
                stop = min(position + RANGE_BLOCK, self.size) - 1
                self.blocks[position] = _range(self.http, self.url, position, stop)
            chunks.append(self.blocks[position])
        return b"".join(chunks)[start - first : end - first]


def _range(http: Http, url: str, start: int, stop: int) -> bytes:
    started = time.monotonic()
    response = http.get(url, headers={"Range": f"bytes={start}-{stop}"}, stream=True)
    if response.status_code != 206:
        response.close()
        raise EnvbuildError(
            f"{url} stopped honouring range requests (HTTP {response.status_code} for bytes {start}-{stop})",
            fix="retry later; nothing was written",
        )
    # a server that sends more than the range asked for is not honouring it either
    body = httpbody.read(response, what=f"bytes {start}-{stop}", limit=stop - start + 1, started=started)
    http.bytes_read += len(body)
    return body


class WheelMetadata(Record):
    __slots__ = ("text", "ranged", "bytes_read")
    text: str
    ranged: bool  # True: read with range requests; False: the server made us download the wheel
    bytes_read: int


class RemoteWheel(Record):
    """A remote wheel opened for reading: with range requests, only the central directory has been
    read, and each member read fetches just its own bytes."""

    __slots__ = ("url", "archive", "ranged", "size")
    url: str
    archive: zipfile.ZipFile
    ranged: bool
    size: int


def open_wheel(http: Http, url: str) -> RemoteWheel:
    """Open a remote wheel: by range requests when the server supports them, else (after one
    suffix-range probe) by downloading the whole file."""
    started = time.monotonic()
    response = http.get(url, headers={"Range": f"bytes=-{RANGE_BLOCK}"}, stream=True)
    if response.status_code == 206:
        total = re.match(r"bytes \d+-\d+/(\d+)", response.headers.get("Content-Range", ""))
        if not total:
            response.close()
            raise malformed(url, "a 206 answer without a Content-Range total")
        tail = httpbody.read(response, what="the wheel's last block", limit=RANGE_BLOCK, started=started)
        http.bytes_read += len(tail)
        size = int(total.group(1))
        source: io.IOBase = io.BufferedReader(_RangeReader(http, url, size, tail), RANGE_BLOCK)
        ranged = True
    elif response.status_code == 200:
        body = _download(http, url, response, started)
        source, size, ranged = io.BytesIO(body), len(body), False
    elif response.status_code == 404:
        response.close()
        raise NotFound(
            f"{url} answered 404 Not Found", fix="the index lists a file it does not serve; retry later"
        )
    else:
        response.close()
        raise EnvbuildError(
            f"{url} answered HTTP {response.status_code}", fix="retry later; nothing was written"
        )
    try:
        archive = zipfile.ZipFile(source)  # type: ignore[arg-type]
    except (zipfile.BadZipFile, EOFError) as exc:
        raise malformed(url, f"not a readable wheel ({exc})") from None
    return RemoteWheel(url=url, archive=archive, ranged=ranged, size=size)


def wheel_metadata(http: Http, url: str) -> WheelMetadata:
    """The METADATA of a remote wheel: its central directory and one member by range requests when
    the server supports them, else the whole file."""
    before = http.bytes_read
    wheel = open_wheel(http, url)
    try:
        with wheel.archive as archive:
            names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise malformed(url, "the wheel has no single *.dist-info/METADATA")
            text = archive.read(names[0]).decode("utf-8")
    except (zipfile.BadZipFile, UnicodeDecodeError, EOFError) as exc:
        raise malformed(url, f"not a readable wheel ({exc})") from None
    return WheelMetadata(text=text, ranged=wheel.ranged, bytes_read=http.bytes_read - before)


def _download(http: Http, url: str, response: requests.Response, started: float) -> bytes:
    """The whole wheel from a server without range support: within DOWNLOAD_BYTES (a Content-Length
    over it is refused before a byte is read) and the request's deadline."""
    body = httpbody.read(response, what="a wheel", limit=limits.DOWNLOAD_BYTES, started=started)
    http.bytes_read += len(body)
    return body


def requires_dist(metadata: str) -> list[str]:
    """The Requires-Dist values of a METADATA file (headers only; the body is the description)."""
    from email.parser import HeaderParser

    return [str(v) for v in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []]
