"""The judging `envbuild attest` does on fetched attachments: consistent documents pass, and each
mismatch fails the check that names it."""

from __future__ import annotations

import json

import pytest

from envbuild.attest import dsse, fields
from envbuild.attest.check import Fetched, judge, summary_line
from envbuild.attest.provenance import build_provenance, statement_bytes
from envbuild.attest.record import BuildRecord
from envbuild.oci import labels as L
from tests.helpers import attest as A

SUBJECTS = [(A.REPOSITORY, A.SUBJECT)]


def plain(
    *, sbom: dict | None = None, record: dict | None = None, subject: str = A.SUBJECT
) -> dict[str, Fetched]:
    provenance = build_provenance(BuildRecord.from_json(record or A.record()), SUBJECTS)
    return {
        fields.KIND_SBOM: Fetched(
            kind=fields.KIND_SBOM,
            media_type=fields.SBOM_MEDIA_TYPE,
            payload=json.dumps(sbom or A.sbom()).encode(),
            manifest_subject=subject,
        ),
        fields.KIND_PROVENANCE: Fetched(
            kind=fields.KIND_PROVENANCE,
            media_type=fields.STATEMENT_MEDIA_TYPE,
            payload=statement_bytes(provenance),
            manifest_subject=subject,
        ),
    }


def signed(key, *, sbom: dict | None = None, subjects=SUBJECTS) -> dict[str, Fetched]:
    wrapped = dsse.sbom_statement(sbom or A.sbom(), subjects)
    provenance = build_provenance(BuildRecord.from_json(A.record()), subjects)
    return {
        kind: Fetched(
            kind=kind,
            media_type=fields.DSSE_MEDIA_TYPE,
            payload=json.dumps(dsse.sign(statement_bytes(document), key)).encode(),
            manifest_subject=A.SUBJECT,
        )
        for kind, document in ((fields.KIND_SBOM, wrapped), (fields.KIND_PROVENANCE, provenance))
    }


@pytest.fixture
def keys(tmp_path):
    private = A.write_key(tmp_path / "key.pem", "ed25519")
    public = A.write_public(private, tmp_path / "key.pub")
    return dsse.load_signing_key(str(private)), dsse.load_public_key(str(public))


def failed(judgement) -> set[str]:
    return {check.name for check in judgement.failed}


def test_consistent_unsigned_documents_pass_every_check() -> None:
    judgement = judge(A.SUBJECT, A.image_labels(), plain())
    assert judgement.ok, judgement.document()
    names = [check.name for check in judgement.checks]
    for expected in (
        "sbom present",
        "provenance present",
        "sbom attached to subject",
        "provenance attached to subject",
        "provenance statement type",
        "provenance statement subject",
        "sbom valid",
        "sbom image digest",
        "lock digest",
        "label spec digest",
        "label smoke report digest",
        "label framework version",
        "label cuda",
        "label min driver",
    ):
        assert expected in names
    assert judgement.signing == "unsigned"
    document = judgement.document()
    assert document["ok"] is True and document["subject"] == A.SUBJECT
    assert json.loads(json.dumps(document)) == document
    line = summary_line(judgement)
    assert line.startswith("attestations: SBOM + provenance for sha256:abababab")
    assert f"unsigned, {len(names)}/{len(names)} checks passed" in line


def test_a_missing_document_is_named() -> None:
    documents = plain()
    del documents[fields.KIND_PROVENANCE]
    judgement = judge(A.SUBJECT, A.image_labels(), documents)
    assert "provenance present" in failed(judgement)
    assert "1/" in summary_line(judgement) and "'provenance present'" in summary_line(judgement)


def test_an_artifact_attached_to_another_digest_fails() -> None:
    judgement = judge(A.SUBJECT, A.image_labels(), plain(subject=A.OTHER))
    assert failed(judgement) == {"sbom attached to subject", "provenance attached to subject"}


def test_a_provenance_about_another_image_fails_its_subject() -> None:
    documents = plain()
    swapped = build_provenance(BuildRecord.from_json(A.record()), [(A.REPOSITORY, A.OTHER)])
    documents[fields.KIND_PROVENANCE] = documents[fields.KIND_PROVENANCE].replace(
        payload=statement_bytes(swapped)
    )
    judgement = judge(A.SUBJECT, A.image_labels(), documents)
    assert failed(judgement) == {"provenance statement subject"}
    (check,) = judgement.failed
    assert A.OTHER in check.detail and f"expected {A.SUBJECT}" in check.detail


def test_an_sbom_that_does_not_validate_fails() -> None:
    broken = A.sbom()
    broken["components"][0].pop("name")
    judgement = judge(A.SUBJECT, A.image_labels(), plain(sbom=broken))
    assert "sbom valid" in failed(judgement)


def test_lock_digests_must_agree() -> None:
    locked_record = A.record() | {"lock_digest": A.LOCK_DIGEST}
    assert judge(A.SUBJECT, A.image_labels(), plain(sbom=A.sbom(lock=A.LOCK_DIGEST), record=locked_record)).ok
    judgement = judge(A.SUBJECT, A.image_labels(), plain(sbom=A.sbom(lock=A.LOCK_DIGEST)))
    assert failed(judgement) == {"lock digest"}
    assert "provenance none" in judgement.failed[0].detail
    other = "sha256:" + "22" * 32
    judgement = judge(A.SUBJECT, A.image_labels(), plain(sbom=A.sbom(lock=other), record=locked_record))
    assert failed(judgement) == {"lock digest"}


@pytest.mark.parametrize(
    ("labels", "sbom", "check"),
    [
        ({L.SPEC_DIGEST: "sha256:" + "33" * 32}, {}, "label spec digest"),
        ({}, {"spec": "sha256:" + "33" * 32}, "label spec digest"),
        ({L.SMOKE_REPORT_DIGEST: "sha256:" + "44" * 32}, {}, "label smoke report digest"),
        ({L.FRAMEWORK_VERSION: "2.12.0"}, {}, "label framework version"),
        ({}, {"framework": "2.13.1"}, "label framework version"),
        ({L.CUDA: "12.9"}, {}, "label cuda"),
        ({}, {"cuda": "13.1.0"}, "label cuda"),
        ({L.MIN_DRIVER: "575.51.03"}, {}, "label min driver"),
        ({}, {"image": A.OTHER}, "sbom image digest"),
    ],
)
def test_each_label_mismatch_fails_its_own_check(labels, sbom, check) -> None:
    judgement = judge(A.SUBJECT, A.image_labels(**labels), plain(sbom=A.sbom(**sbom)))
    assert failed(judgement) == {check}


def test_a_build_of_the_labelled_release_agrees() -> None:
    # the label names the release; the installed wheel and the runtime are builds of it
    documents = plain(sbom=A.sbom(framework="2.13.0+cpu", cuda="13.0.96"))
    assert judge(A.SUBJECT, A.image_labels(), documents).ok
    documents = plain(sbom=A.sbom(framework="2.13.0", cuda="13.0"))
    assert judge(A.SUBJECT, A.image_labels(), documents).ok


def test_signed_documents_verify_with_the_key(keys) -> None:
    private, public = keys
    judgement = judge(A.SUBJECT, A.image_labels(), signed(private), public_key=public)
    assert judgement.ok, judgement.document()
    assert judgement.signing == "verified" and judgement.keyid == dsse.keyid(public)
    names = {check.name for check in judgement.checks}
    assert {
        "sbom signature",
        "provenance signature",
        "sbom statement subject",
        "sbom statement type",
    } <= names
    assert f"signed (key {dsse.keyid(public)[:8]}…)" in summary_line(judgement)


def test_signed_documents_without_a_key_are_signed_not_checked(keys) -> None:
    private, _ = keys
    judgement = judge(A.SUBJECT, A.image_labels(), signed(private))
    assert judgement.ok
    assert judgement.signing == "signed, not checked"
    signature = next(c for c in judgement.checks if c.name == "sbom signature")
    assert "not checked" in signature.detail
    assert "signed, not checked" in summary_line(judgement)


def test_unsigned_documents_with_a_key_fail_the_signature_checks(keys) -> None:
    _, public = keys
    judgement = judge(A.SUBJECT, A.image_labels(), plain(), public_key=public)
    assert {"sbom signature", "provenance signature"} <= failed(judgement)


def test_a_signature_by_another_key_fails(keys, tmp_path) -> None:
    _, public = keys
    other = dsse.load_signing_key(str(A.write_key(tmp_path / "other.pem", "p384")))
    judgement = judge(A.SUBJECT, A.image_labels(), signed(other), public_key=public)
    assert failed(judgement) == {"sbom signature", "provenance signature"}
    assert all("no signature by this key" in check.detail for check in judgement.failed)


def test_a_changed_signed_sbom_fails_its_signature(keys) -> None:
    private, public = keys
    documents = signed(private)
    envelope = json.loads(documents[fields.KIND_SBOM].payload)
    inner = json.loads(dsse.envelope_payload(envelope))
    inner["predicate"]["components"][0]["version"] = "2.13.0+evil"
    envelope["payload"] = dsse.sign(statement_bytes(inner), private)[
        "payload"
    ]  # payload swapped, old sig kept
    documents[fields.KIND_SBOM] = documents[fields.KIND_SBOM].replace(payload=json.dumps(envelope).encode())
    judgement = judge(A.SUBJECT, A.image_labels(), documents, public_key=public)
    assert failed(judgement) == {"sbom signature"}
    assert "signature invalid" in judgement.failed[0].detail


def test_a_signed_sbom_about_another_image_fails_its_statement_subject(keys) -> None:
    private, public = keys
    documents = signed(private)
    documents[fields.KIND_SBOM] = signed(private, subjects=[(A.REPOSITORY, A.OTHER)])[fields.KIND_SBOM]
    judgement = judge(A.SUBJECT, A.image_labels(), documents, public_key=public)
    assert failed(judgement) == {"sbom statement subject"}


def test_a_wrong_media_type_is_named() -> None:
    documents = plain()
    documents[fields.KIND_SBOM] = documents[fields.KIND_SBOM].replace(media_type="application/spdx+json")
    judgement = judge(A.SUBJECT, A.image_labels(), documents)
    assert "sbom media type" in failed(judgement)


def test_a_candidate_without_the_smoke_label_agrees_with_its_attached_report() -> None:
    """A CI builder's candidate, promoted registry-side, never gets the smoke label (promote by
    digest does not relabel): `attest --attach --report` tied the report to its image id, and the
    absent label contradicts nothing. A label that names another report still fails (above)."""
    labels = {k: v for k, v in A.image_labels().items() if k != L.SMOKE_REPORT_DIGEST}
    judgement = judge(A.SUBJECT, labels, plain(sbom=A.sbom()))
    assert judgement.ok, [c.detail for c in judgement.failed]
    check = next(c for c in judgement.checks if c.name == "label smoke report digest")
    assert "none" in check.detail
