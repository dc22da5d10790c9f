"""One line of `envbuild doctor`'s checklist, in a module of its own so that every group of checks
(doctor's own, runtimecheck's for the HPC runtimes) makes the same record without importing the other.
"""

from __future__ import annotations

from envbuild._util.record import Record


class Check(Record):
    __slots__ = ("name", "status", "evidence", "fix")
    name: str
    status: str  # ok | warn | fail | skip
    evidence: str
    fix: str | None
