"""The attest stage: the SBOM and provenance of the promoted image, next to record.json and, with
--push, attached to every pushed digest."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from envbuild._util.record import TYPE_CHECKING

if TYPE_CHECKING:
    from envbuild.stages.settings import BuildSettings
    from envbuild.stages.target import RecordFile


def run(
    record: RecordFile, image_id: str, directory: str, settings: BuildSettings, *, say: Callable[[str], None]
) -> None:
    """Its outcome goes under the record's attestations (fields.RECORD_AFTER_ATTACH), which the
    documents never cover: they are built from the record as it was before this stage."""
    from envbuild.attest.publish import publish

    started = time.perf_counter()
    published = publish(record.current, image_id, directory=directory, sign_key=settings.sign_key)
    record.update(
        attestations={
            "files": [os.path.basename(path) for path in published.files],
            "attached": list(published.attached),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )
    target = record.current.target
    for item in published.attached:
        say(
            f"{target}: attached the {item['kind']} {item['digest'][:19]} to {item['subject']} "
            f"({item['path']}{', signed' if settings.sign_key else ''})"
        )
