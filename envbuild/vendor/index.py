"""The files of one project on a Python package index: PEP 691 JSON, or a PEP 503 HTML page (a
simple index, or a find-links page such as JAX's), each with the sha256 the index states.

The URL asked is the mirror's (the spec's [mirrors]); each file's URL is resolved against the page
it came from, so a mirror answering with relative links is read as it means.
"""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

from envbuild._util import httpbody, limits
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from envbuild.vendor.session import Session

PEP691_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{PEP691_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_FILES = 100_000  # links one page may list (PyPI's largest projects list tens of thousands)


class IndexFile(Record):
    """One file a project page lists: its name, where to get it, and the sha256 the index states
    (None when the page states none)."""

    __slots__ = ("filename", "url", "sha256", "size")
    filename: str
    url: str
    sha256: str | None
    size: int | None


def project_url(index: str, project: str) -> str:
    """The page listing `project`'s files: the index's project page, or a find-links page itself."""
    if index.rstrip("/").endswith((".html", ".htm")):
        return index
    return f"{index.rstrip('/')}/{project}/"


def _malformed(url: str, why: str) -> EnvbuildError:
    return EnvbuildError(
        f"malformed answer from {redact(url)}: {why}",
        fix="check that the URL is a Python package index (PEP 503 or 691); nothing was written",
    )


def _sha256(value: object) -> str | None:
    return value if isinstance(value, str) and _HEX64.fullmatch(value) else None


def _from_json(url: str, body: bytes) -> list[IndexFile]:
    try:
        data = parse_json(body)
    except ValueError:
        raise _malformed(url, "the body is not JSON") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or len(files) > MAX_FILES:
        raise _malformed(url, "no 'files' list (is it a PEP 691 JSON index?)")
    out = []
    for entry in files:
        if not isinstance(entry, dict):
            raise _malformed(url, "a file entry is not an object")
        name, link = entry.get("filename"), entry.get("url")
        if not isinstance(name, str) or not isinstance(link, str) or not name or not link:
            raise _malformed(url, "a file entry has no 'filename' or 'url'")
        hashes = entry.get("hashes")
        size = entry.get("size")
        out.append(
            IndexFile(
                filename=name,
                url=urldefrag(urljoin(url, link))[0],
                sha256=_sha256(hashes.get("sha256")) if isinstance(hashes, dict) else None,
                size=size if isinstance(size, int) and size >= 0 else None,
            )
        )
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and len(self.links) <= MAX_FILES:
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def _from_html(url: str, body: bytes) -> list[IndexFile]:
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    if len(parser.links) > MAX_FILES:
        raise _malformed(url, f"the page lists more than {MAX_FILES} links")
    out = []
    for href in parser.links:
        link, fragment = urldefrag(urljoin(url, href))
        name = link.rsplit("/", 1)[-1].split("?", 1)[0]
        from urllib.parse import unquote

        name = unquote(name)
        key, _, value = fragment.partition("=")
        out.append(
            IndexFile(filename=name, url=link, sha256=_sha256(value) if key == "sha256" else None, size=None)
        )
    return out


def project_files(session: Session, index: str, project: str) -> list[IndexFile]:
    """The files `index` (already the mirror's URL) lists for `project` (a canonical name); an index
    that does not know it is an EnvbuildError naming the page."""
    url = project_url(index, project)
    started = time.monotonic()
    response = session.get(url, headers={"Accept": ACCEPT})
    if response.status_code != 200:
        response.close()
        raise EnvbuildError(
            f"{redact(url)} answered HTTP {response.status_code} for project {project}",
            fix="check the index (the lock's, through the spec's [mirrors]) and that it serves the "
            "project; then run `envbuild vendor` again: what it fetched is kept",
        )
    kind = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    body = httpbody.read(response, what="an index page", limit=limits.DOCUMENT_BYTES, started=started)
    final = str(response.url or url)  # a redirect to the canonical page: links are relative to it
    return _from_json(final, body) if kind == PEP691_JSON else _from_html(final, body)
