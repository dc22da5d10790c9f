"""TargetRun, what every stage is told about the one image it works on, and RecordFile, the record's
writer."""

from __future__ import annotations

import json
import os
import time

from envbuild._util.files import write_atomic
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact_values
from envbuild.attest.record import BuildRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from envbuild.lockfile.model import LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.spec.model import Spec, Target
    from envbuild.stages.settings import BuildSettings

RECORD = "record.json"


def write_record(path: str, record: BuildRecord) -> None:
    """record.json, every string redacted as it is written: its error and smoke fields carry Engine
    and registry text."""
    write_atomic(path, json.dumps(redact_values(record.to_json()), indent=2, sort_keys=True) + "\n")


class RecordFile:
    """One target's record as its stages fill it in: the latest BuildRecord, and the record.json it is
    written to. The records are frozen values; this is the one thing a stage changes, so a stage that
    raises after adding its outcome (an audit that failed, a smoke step that did not pass) leaves that
    outcome for the runner's failure record."""

    __slots__ = ("path", "current")

    def __init__(self, path: str, record: BuildRecord) -> None:
        self.path = path
        self.current = record

    def update(self, **changes: object) -> BuildRecord:
        """The record with these fields set (not yet written)."""
        self.current = self.current.with_(**changes)
        return self.current

    def write(self) -> None:
        write_record(self.path, self.current)

    def stage_done(self, name: str, started: float, **extra: object) -> None:
        """The stage's entry in the record (its seconds and outcome), written at once."""
        self.current = self.current.with_stage(
            name, {"seconds": round(time.perf_counter() - started, 3), **extra}
        )
        self.write()


class TargetRun(Record):
    """One target on one platform, as the stages see it. settings: how the build runs (flags, then
    ENVBUILD_*, then envbuild.toml); lock: this platform's own entry (None: unlocked); context: the
    name of its context under out_dir, where its record is written too; say: progress lines for the
    user; progress: the build's own output (None: the engine's default)."""

    __slots__ = (
        "matrix",
        "spec",
        "target",
        "settings",
        "lock",
        "platform",
        "out_dir",
        "context",
        "say",
        "progress",
    )
    matrix: Matrix
    spec: Spec
    target: Target
    settings: BuildSettings
    lock: LockedTarget | None
    platform: str | None
    out_dir: str
    context: str
    say: Callable[[str], None]
    progress: Callable[[str], None] | None

    @property
    def smoke_device(self) -> str:
        """cpu or gpu: the settings' (the flag, ENVBUILD_SMOKE_DEVICE, or [smoke] device)."""
        return self.settings.smoke_device

    @property
    def context_dir(self) -> str:
        return os.path.join(self.out_dir, self.context)

    @property
    def record_path(self) -> str:
        return os.path.join(self.context_dir, RECORD)

    def tell(self, line: str) -> None:
        """A progress line about this target."""
        self.say(f"{self.target.name}: {line}")
