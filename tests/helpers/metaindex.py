"""A loopback PEP 691 index that serves recorded METADATA of real wheels through PEP 658, never a wheel.

tests/fixtures/metadata/ holds what tests/fixtures/metadata/record.py read from PyPI: `index.json`
lists, per project, the real wheel file names with their real sha256 and Requires-Python, and
`files/<wheel>.METADATA` holds each wheel's METADATA, cut to the fields a resolver reads (Name,
Version, Requires-Python, Requires-Dist, Provides-Extra), verbatim. This server answers

- ``/simple/<project>/``: the PEP 691 JSON page, each file with ``core-metadata`` (PEP 714) and
  ``data-dist-info-metadata`` (PEP 658) naming the sha256 of its METADATA;
- ``/files/<wheel>.metadata``: that METADATA;
- ``/files/<wheel>``: 404, counted in `wheel_requests` — a resolver that reads metadata alone never
  asks for one, and a test can prove it.

A project that is not recorded is a 404, which uv reports as "not found in the package registry".
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from tests.helpers.paths import REPO
from tests.helpers.registry import LoopbackServer, RegistryHandler

RECORDINGS = REPO / "tests" / "fixtures" / "metadata"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def recorded_projects(recordings: Path = RECORDINGS) -> dict[str, list[dict]]:
    """index.json's projects: canonical name -> file entries (filename, sha256, requires-python, yanked)."""
    return json.loads((recordings / "index.json").read_text())["projects"]


class MetadataIndex(LoopbackServer):
    """Serve the recordings under `recordings` on 127.0.0.1 while the `with` block runs."""

    def __init__(self, recordings: Path = RECORDINGS) -> None:
        self.recordings = recordings
        self.projects = recorded_projects(recordings)
        self.requests: Counter[str] = Counter()
        self.wheel_requests: list[str] = []
        self._lock = threading.Lock()
        index = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                index.answer(self)

            do_HEAD = do_GET

        super().__init__(Handler)

    @property
    def url(self) -> str:
        return f"http://{self.host}/simple"

    def metadata(self, filename: str) -> bytes | None:
        path = self.recordings / "files" / f"{filename}.METADATA"
        return path.read_bytes() if path.is_file() else None

    def answer(self, handler: RegistryHandler) -> None:
        path = urlsplit(handler.path).path
        with self._lock:
            self.requests[path] += 1
        parts = [unquote(p) for p in path.split("/")]
        if len(parts) == 4 and parts[1] == "simple" and parts[3] == "":
            return self._page(handler, parts[2])
        if len(parts) == 3 and parts[1] == "files" and parts[2].endswith(".whl.metadata"):
            body = self.metadata(parts[2][: -len(".metadata")])
            if body is not None:
                return handler.reply(200, body, media_type="application/octet-stream")
        elif len(parts) == 3 and parts[1] == "files":
            with self._lock:
                self.wheel_requests.append(parts[2])
        return handler.reply(404, b"not recorded\n", media_type="text/plain")

    def _page(self, handler: RegistryHandler, project: str) -> None:
        files = self.projects.get(project)
        if files is None:
            return handler.reply(404, b"not recorded\n", media_type="text/plain")
        entries = []
        for entry in files:
            metadata = self.metadata(entry["filename"])
            if metadata is None:  # a recording without its METADATA is broken: uv prints this body
                missing = f"tests/fixtures/metadata/files/{entry['filename']}.METADATA is missing\n"
                return handler.reply(500, missing.encode(), media_type="text/plain")
            digest = {"sha256": hashlib.sha256(metadata).hexdigest()}
            item = {
                "filename": entry["filename"],
                "url": f"http://{self.host}/files/{quote(entry['filename'])}",
                "hashes": {"sha256": entry["sha256"]},
                "core-metadata": digest,
                "data-dist-info-metadata": digest,
                "yanked": entry.get("yanked", False),
            }
            if entry.get("requires-python"):
                item["requires-python"] = entry["requires-python"]
            entries.append(item)
        payload = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
        return handler.reply(200, json.dumps(payload).encode(), media_type=JSON_TYPE)
