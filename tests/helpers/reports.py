"""Smoke report files as `envbuild verify --report` writes them, from the captured real reports
(tests/fixtures/smoke/SOURCES.md), for tests that promote an image they built themselves."""

from __future__ import annotations

import json
from pathlib import Path

from envbuild.image.verify import report_digest, report_document
from tests.helpers.paths import FIXTURES


def captured(name: str) -> dict:
    """A captured `envbuild smoke --json` report: torch-cpu-passed.json, torch-cpu-lr0-failed.json."""
    return json.loads((FIXTURES / "smoke" / name).read_text())


def write_report(path: Path, report: dict, image_id: str, device: str = "cpu") -> str:
    """The verify report file for `image_id`, its report-digest computed as verify computes it."""
    document = report_document(image_id, device, report)
    path.write_text(json.dumps({**document, "report-digest": report_digest(document)}))
    return str(path)
