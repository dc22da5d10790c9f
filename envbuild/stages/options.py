"""How `envbuild build` runs: one frozen value every stage reads."""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from envbuild.audit.skip import AuditSkip


class BuildOptions(Record):
    """How `envbuild build` runs, merged from the command line and the spec's [smoke] table."""

    __slots__ = (
        "out_dir",
        "builder",
        "smoke_device",
        "push",
        "base_image",
        "wheelhouse",
        "no_cache",
        "jobs",
        "lock_key",
        "allow_edited_lock",
        "sign_key",
        "skip_audit",
    )
    out_dir: str
    builder: str  # auto | api | buildkit
    smoke_device: str | None  # None: the spec's [smoke] device
    push: bool
    base_image: str | None
    wheelhouse: str | None
    no_cache: bool
    jobs: int
    lock_key: bytes | None  # the HMAC key a sealed lock is checked with (lockfile.seal)
    allow_edited_lock: bool  # build from a lock whose seal fails, with a warning: emergencies only
    sign_key: str | None  # a PEM key: the attached SBOM and provenance are DSSE envelopes it signed
    skip_audit: tuple[AuditSkip, ...]  # --skip-audit: added to the spec's [audit] skip (a flag wins)

    def __init__(self, *, skip_audit: tuple[AuditSkip, ...] = (), **values: object) -> None:
        super().__init__(skip_audit=skip_audit, **values)
