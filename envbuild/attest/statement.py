"""in-toto Statements v1, the one envelope both documents travel in, and their canonical bytes.

The provenance is a Statement (predicateType SLSA); a signed SBOM is wrapped in one (predicateType
CycloneDX) before its DSSE envelope. One builder keeps the subject shape and the byte form the same
for both, so `statement_bytes` of a statement rebuilt from record.json is byte-identical to the one
attached: that is what makes the provenance checkable by rebuilding it.
"""

from __future__ import annotations

import json
import re

from envbuild.attest import fields
from envbuild.errors import UsageError

_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def canonical_json(value: object) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same value gives the same bytes on every machine."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def statement_bytes(statement: dict) -> bytes:
    """A statement's bytes as written, attached and signed: canonical JSON and a trailing newline."""
    return canonical_json(statement) + b"\n"


def subject_list(subjects: list[tuple[str, str]]) -> list[dict]:
    """[(name, "sha256:<hex>")] -> in-toto subjects [{"name", "digest": {"sha256": hex}}].

    A subject is what the document is about: an image's manifest digest, never a tag (a tag moves)."""
    if not subjects:
        raise UsageError(
            "an attestation needs at least one subject: the image's manifest digest",
            fix="pass [(repository, 'sha256:<hex>')] of the promoted or pushed image",
        )
    out = []
    for name, digest in subjects:
        match = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
        if not match or not isinstance(name, str) or not name:
            raise UsageError(
                f"attestation subject {name!r} {digest!r} is not a name and a digest",
                fix="a subject is (image name, 'sha256:' followed by 64 lowercase hex digits)",
            )
        out.append({"name": name, "digest": {"sha256": match.group(1)}})
    return out


def statement(subjects: list[tuple[str, str]], predicate_type: str, predicate: dict) -> dict:
    """An in-toto Statement v1 about `subjects`."""
    return {
        "_type": fields.STATEMENT_TYPE,
        "subject": subject_list(subjects),
        "predicateType": predicate_type,
        "predicate": predicate,
    }
