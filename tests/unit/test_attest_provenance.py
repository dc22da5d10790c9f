"""SLSA v1 provenance from the e2e test's record.json: the fields SLSA and in-toto require, every
resolved dependency, the record byproduct, and byte-identical output rebuilt from the file."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from envbuild.attest import fields
from envbuild.attest.provenance import build_provenance, statement_bytes
from envbuild.attest.record import BuildRecord
from envbuild.errors import UsageError
from tests.helpers import attest as A


def provenance(record: dict | None = None) -> dict:
    return build_provenance(
        BuildRecord.from_json(record if record is not None else A.record()), [(A.REPOSITORY, A.SUBJECT)]
    )


def test_statement_has_the_in_toto_and_slsa_required_fields() -> None:
    statement = provenance()
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": A.REPOSITORY, "digest": {"sha256": "ab" * 32}}]
    definition = statement["predicate"]["buildDefinition"]
    assert definition["buildType"] == fields.BUILD_TYPE
    assert definition["externalParameters"] == {
        "spec": {"path": "envbuild.toml", "digest": {"sha256": A.SPEC_DIGEST.removeprefix("sha256:")}},
        "target": "default",
        "platform": "linux/amd64",
        "smokeDevice": "cpu",
    }
    assert definition["internalParameters"] == {
        "matrixDigest": "sha256:a73f56013ef05960ff932025a4acb9f7ec20c3a236258a3e2c29fac1cf43b726",
        "envbuildVersion": "0.1.0",
    }
    run = statement["predicate"]["runDetails"]
    assert run["builder"] == {
        "id": fields.BUILDER_ID,
        "version": {"envbuild": "0.1.0", "engine": "20.10.24+dfsg1", "backend": "buildkit"},
    }
    assert run["metadata"] == {"startedOn": "2026-12-01T05:19:29Z", "finishedOn": "2026-12-01T05:19:53Z"}
    assert fields.subject_digests(statement) == [A.SUBJECT]
    assert fields.provenance_spec_digest(statement) == A.SPEC_DIGEST


def test_lock_digest_is_internal_and_absent_when_unlocked() -> None:
    assert fields.provenance_lock_digest(provenance()) is None
    assert "lockDigest" not in provenance()["predicate"]["buildDefinition"]["internalParameters"]
    locked = A.record() | {"lock_digest": A.LOCK_DIGEST}
    assert fields.provenance_lock_digest(provenance(locked)) == A.LOCK_DIGEST


def test_resolved_dependencies_are_the_base_image_and_every_wheel_hash() -> None:
    record = A.record()
    resolved = provenance(record)["predicate"]["buildDefinition"]["resolvedDependencies"]
    base = resolved[0]
    assert base == {
        "name": "envbuild-test/bookworm:latest",
        "uri": "pkg:docker/envbuild-test/bookworm@latest?platform=linux/amd64",
    }
    wheels = resolved[1:]
    assert len(wheels) == len(record["dependencies"]) == 13
    for wheel, dep in zip(wheels, record["dependencies"], strict=True):
        assert wheel["digest"] == {"sha256": dep["hashes"][0].removeprefix("sha256:")}
        assert wheel["annotations"]["hashes"] == dep["hashes"]
        assert wheel["annotations"]["index"] == dep["index"] and wheel["annotations"]["layer"] == dep["layer"]
        assert wheel["name"] == dep["file"]
    torch = next(w for w in wheels if w["name"].startswith("torch-"))
    assert torch["uri"] == "pkg:pypi/torch@2.13.0%2Bcpu"
    assert torch["digest"]["sha256"] == "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"
    assert {w["uri"] for w in wheels} >= {
        "pkg:pypi/six@1.16.0",
        "pkg:pypi/six@1.17.0",
        "pkg:pypi/typing-extensions@4.16.0",
    }


def test_pinned_base_image_on_another_registry_carries_its_digest() -> None:
    digest = "e3" * 32
    record = A.record() | {"base_image": f"nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04@sha256:{digest}"}
    base = provenance(record)["predicate"]["buildDefinition"]["resolvedDependencies"][0]
    assert base["digest"] == {"sha256": digest}
    assert base["uri"] == (
        f"pkg:docker/nvidia/cuda@sha256:{digest}?platform=linux/amd64&repository_url=nvcr.io"
    )
    hub = provenance(A.record() | {"base_image": "debian:12"})["predicate"]["buildDefinition"]
    assert hub["resolvedDependencies"][0]["uri"] == "pkg:docker/debian@12?platform=linux/amd64"


def test_record_is_a_byproduct_with_its_digest_and_content() -> None:
    record = A.record()
    (byproduct,) = provenance(record)["predicate"]["runDetails"]["byproducts"]
    assert byproduct["name"] == "record.json" and byproduct["mediaType"] == "application/json"
    content = base64.b64decode(byproduct["content"])
    assert json.loads(content) == record
    assert byproduct["digest"] == {"sha256": hashlib.sha256(content).hexdigest()}


def test_fields_written_after_attaching_do_not_change_the_provenance() -> None:
    before = statement_bytes(provenance())
    after = A.record() | {"attestations": {"sbom": "sha256:" + "00" * 32}}
    assert statement_bytes(provenance(after)) == before
    changed = A.record() | {"finished": "2026-12-01T05:20:00Z"}
    assert statement_bytes(provenance(changed)) != before


def test_rebuilt_from_record_json_byte_identical(tmp_path) -> None:
    """docs/attest.md's recipe: json.load the record, build_provenance it; a BuildRecord gives the same."""
    first = statement_bytes(build_provenance(json.loads(A.RECORD.read_bytes()), [(A.REPOSITORY, A.SUBJECT)]))
    copy = tmp_path / "record.json"
    copy.write_text(json.dumps(json.loads(A.RECORD.read_bytes()), indent=1, sort_keys=False))
    second = statement_bytes(build_provenance(json.loads(copy.read_bytes()), [(A.REPOSITORY, A.SUBJECT)]))
    typed = statement_bytes(
        build_provenance(BuildRecord.from_json(json.loads(copy.read_bytes())), [(A.REPOSITORY, A.SUBJECT)])
    )
    assert first == second == typed
    assert first.endswith(b"}\n") and b"\n" not in first[:-1]
    assert json.loads(first) == provenance()


def test_credentials_in_the_record_never_reach_the_statement() -> None:
    record = A.record()
    record["dependencies"][0]["index"] = "https://alice:s3cret@pypi.example.com/simple"
    record["stack"]["index_url"] = "https://bob:hunter2@download.example.com/whl"
    text = statement_bytes(provenance(record)).decode()
    content = base64.b64decode(
        json.loads(text)["predicate"]["runDetails"]["byproducts"][0]["content"]
    ).decode()
    for secret in ("s3cret", "hunter2", "alice", "bob"):
        assert secret not in text and secret not in content


@pytest.mark.parametrize(
    "subjects",
    [[], [(A.REPOSITORY, "sha256:abc")], [(A.REPOSITORY, "latest")], [("", A.SUBJECT)]],
)
def test_a_subject_must_be_a_name_and_a_manifest_digest(subjects) -> None:
    with pytest.raises(UsageError) as caught:
        build_provenance(BuildRecord.from_json(A.record()), subjects)
    assert "subject" in caught.value.message and caught.value.fix


def test_a_malformed_base_image_names_the_record_field() -> None:
    with pytest.raises(UsageError, match="record field base_image"):
        provenance(A.record() | {"base_image": "Not A Reference"})
