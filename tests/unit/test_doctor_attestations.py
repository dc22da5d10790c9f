"""`envbuild doctor --image`'s one line about the image's attestations (issue 20, item 5): printed under
the image's checks when there is one, and never a failure: a registry that cannot be read is a note.

The reader is envbuild.attest.summary.attestation_line; a test hands doctor its own reader where it
needs a line (the registry reader is written elsewhere), and a real, unreachable registry on a closed
loopback port for the error path: no mocks.
"""

from __future__ import annotations

import pytest

from envbuild.attest.summary import attestation_line
from envbuild.host.doctor import NAME_COLUMN, attestation_checks, run_doctor, to_json, to_text
from envbuild.oci.registry import resolve_digest

DIGEST = "sha256:" + "ab" * 32
PUSHED = f"127.0.0.1:9/acme/train@{DIGEST}"  # port 9 (discard): nothing listens on loopback there
LINE = "attestations: sbom + provenance, signed (ed25519), subject and lock digests agree"


def unreachable(image: str) -> str | None:
    """A reader that asks a real registry: 127.0.0.1:9 refuses the connection."""
    resolve_digest(image.split("@", 1)[0] + ":v1", timeout=5, retries=0)
    return LINE


def test_the_line_is_printed_under_the_image_checks():
    checks = attestation_checks(PUSHED, lambda image: LINE if image == PUSHED else None)
    assert [(c.name, c.status, c.evidence, c.fix) for c in checks] == [
        (f"image {PUSHED} attestations", "ok", LINE, None)
    ]
    text = to_text(checks, colour=False)
    # a name past the name column is alone on its line; the evidence follows in the column (doctor_layout)
    assert f"[  ok] image {PUSHED} attestations\n" in text
    assert f"\n{' ' * (len('[  ok] ') + NAME_COLUMN + 2)}{LINE}\n" in text
    assert text.endswith("0 failed, 0 warning(s), 1 checks\n")


def test_an_unreadable_registry_is_a_note_not_a_failure():
    checks = attestation_checks(PUSHED, unreachable)
    (check,) = checks
    assert check.name == f"image {PUSHED} attestations"
    assert check.status == "skip" and check.fix is None
    assert check.evidence.startswith("attestations: could not be read: ")
    assert "127.0.0.1:9" in check.evidence
    assert "\n" not in check.evidence and "Traceback" not in check.evidence
    assert '"ok": true' in to_json(checks)


def test_any_error_inside_the_reader_is_a_note():
    def broken(image: str) -> str | None:
        raise KeyError("predicate")

    (check,) = attestation_checks(PUSHED, broken)
    assert check.status == "skip"
    assert check.evidence == "attestations: could not be read: KeyError: 'predicate'"


def test_no_line_is_no_check():
    assert attestation_checks(PUSHED, lambda image: None) == []


@pytest.mark.parametrize("image", ["train:v1", "ghcr.io/acme/train:v1", "localhost/acme/train"])
def test_a_local_image_has_no_attestation_line(image):
    """Attachments hang off a pushed manifest's digest: a name:tag has none to read, and doctor says
    nothing about them (and asks no registry)."""
    assert attestation_line(image) is None
    assert attestation_checks(image) == []


def test_run_doctor_puts_the_line_after_the_image_checks_and_does_not_fail_on_it(matrix):
    checks = run_doctor(matrix, image=PUSHED, gpu=False, timeout=60, attestations=lambda image: LINE)
    names = [c.name for c in checks]
    assert names[-1] == f"image {PUSHED} attestations"
    assert names.index(f"image {PUSHED}") < names.index(f"image {PUSHED} attestations")
    note = run_doctor(matrix, image=PUSHED, gpu=False, timeout=60, attestations=unreachable)[-1]
    assert note.status == "skip" and note.evidence.startswith("attestations: could not be read: ")


def test_a_failed_judgement_is_a_warning_pointing_at_envbuild_attest():
    failed = "attestations for sha256:abababababab…: 1/14 checks failed, first 'label cuda': 12.9 vs 13.0"
    (check,) = attestation_checks(PUSHED, lambda image: failed)
    assert check.status == "warn" and check.evidence == failed
    assert check.fix == f"see every check: envbuild attest {PUSHED}"
