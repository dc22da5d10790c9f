"""Documents attached to an image digest in a real registry (Debian's docker-registry 2.8.2, which has
no referrers API, so envbuild keeps the "sha256-<hex>" tag index), listed, fetched back byte for
byte, kept by promotion, and refused when the index or the artifact was altered. No Engine build:
the images are uploaded over the registry API, each with a fresh digest."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import requests

from envbuild.attest import fields
from envbuild.attest.attach import attach_documents, fetch_documents
from envbuild.errors import EnvbuildError
from envbuild.image.promote import promote_in_registry
from envbuild.oci.referrers import (
    CREATED,
    EMPTY_DESCRIPTOR,
    OCI_INDEX,
    OCI_MANIFEST,
    PATH_API,
    PATH_TAG,
    attach,
    fetch_artifact,
    referrers,
)
from envbuild.oci.registry import promote_by_digest
from tests.helpers.referrers import fresh_image, fresh_index, put_manifest, referrers_api_status, tag_index
from tests.helpers.registry import start_registry, stop

pytestmark = pytest.mark.docker

SRC = "envbuild-test/referrers-src"
DST = "envbuild-test/referrers-dst"

SBOM = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}).encode()
STATEMENT = json.dumps({"_type": fields.STATEMENT_TYPE, "predicateType": fields.SLSA_PREDICATE}).encode()
DOCUMENTS = [
    (fields.KIND_SBOM, SBOM, fields.SBOM_MEDIA_TYPE),
    (fields.KIND_PROVENANCE, STATEMENT, fields.STATEMENT_MEDIA_TYPE),
]


def expected_path(host: str, repo: str, digest: str) -> str:
    """What the registry supports, asked directly: 404 on the referrers endpoint means no API."""
    return PATH_TAG if referrers_api_status(host, repo, digest) == 404 else PATH_API


def test_two_documents_are_attached_listed_filtered_and_fetched_exactly(anonymous_registry: str) -> None:
    host = anonymous_registry
    digest, _ = fresh_image(host, SRC, "two-docs")
    subject = f"{host}/{SRC}@{digest}"
    attached = attach_documents(subject, DOCUMENTS)
    path = expected_path(host, SRC, digest)
    print(f"registry {host} took the {path} path")
    assert [a.path for a in attached] == [path, path]
    assert {a.subject for a in attached} == {subject}

    listed = referrers(subject)
    assert listed.path == path
    assert {d["digest"] for d in listed.descriptors} == {a.digest for a in attached}
    assert {d["artifactType"] for d in listed.descriptors} == set(fields.KINDS.values())
    only = referrers(subject, artifact_type=fields.SBOM_MEDIA_TYPE)
    assert [d["digest"] for d in only.descriptors] == [attached[0].digest]
    assert only.descriptors[0]["annotations"][fields.ANNOTATION_KIND] == fields.KIND_SBOM

    artifact = fetch_artifact(f"{host}/{SRC}", only.descriptors[0])
    assert artifact.payload == SBOM
    assert artifact.media_type == fields.SBOM_MEDIA_TYPE
    assert artifact.subject_digest == digest
    assert artifact.manifest["mediaType"] == OCI_MANIFEST
    assert artifact.manifest["artifactType"] == fields.SBOM_MEDIA_TYPE
    assert artifact.manifest["config"] == EMPTY_DESCRIPTOR
    assert artifact.manifest["subject"]["digest"] == digest
    assert CREATED in artifact.manifest["annotations"]

    found_digest, found, found_path = fetch_documents(f"{host}/{SRC}:two-docs")  # by tag
    assert (found_digest, found_path) == (digest, path)
    assert {kind: a.payload for kind, a in found.items()} == {"sbom": SBOM, "provenance": STATEMENT}


def test_attaching_again_does_not_duplicate_and_the_newest_wins(anonymous_registry: str) -> None:
    host = anonymous_registry
    digest, _ = fresh_image(host, SRC, "again")
    subject = f"{host}/{SRC}@{digest}"
    first = attach_documents(subject, DOCUMENTS[:1])
    second = attach_documents(subject, DOCUMENTS[:1])
    assert [a.digest for a in second] == [a.digest for a in first]
    kind = {fields.ANNOTATION_KIND: fields.KIND_SBOM}
    third = attach(
        subject,
        artifact_type=fields.SBOM_MEDIA_TYPE,
        payload=SBOM,
        media_type=fields.SBOM_MEDIA_TYPE,
        annotations={**kind, CREATED: "2001-01-01T00:00:00Z"},
    )
    assert third.digest == first[0].digest  # the same document, whatever its created says
    assert len(referrers(subject).descriptors) == 1
    if third.path == PATH_TAG:
        assert len(tag_index(host, SRC, digest)["manifests"]) == 1

    newer = b'{"bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": "newer"}'
    for payload, created in ((newer, "2999-01-01T00:00:00Z"), (b'{"older": true}', "2000-01-01T00:00:00Z")):
        attach(
            subject,
            artifact_type=fields.SBOM_MEDIA_TYPE,
            payload=payload,
            media_type=fields.SBOM_MEDIA_TYPE,
            annotations={**kind, CREATED: created},
        )
    assert len(referrers(subject).descriptors) == 3
    assert fetch_documents(subject)[1]["sbom"].payload == newer


def test_an_index_subject_and_its_promotion_into_another_repository(anonymous_registry: str) -> None:
    host = anonymous_registry
    tag = f"index-{uuid.uuid4().hex[:8]}"
    digest = fresh_index(host, SRC, tag)
    subject = f"{host}/{SRC}@{digest}"
    attached = attach_documents(subject, DOCUMENTS)
    artifact = fetch_documents(f"{host}/{SRC}:{tag}")[1]["provenance"]
    assert artifact.payload == STATEMENT
    assert artifact.manifest["subject"]["mediaType"] == OCI_INDEX
    got = requests.get(
        f"http://{host}/v2/{SRC}/manifests/{digest}", headers={"Accept": OCI_INDEX}, timeout=10
    )
    child = got.json()
    child_digest = child["manifests"][1]["digest"]
    attach_documents(f"{host}/{SRC}@{child_digest}", DOCUMENTS[:1])

    promoted = promote_in_registry(subject, [f"{host}/{DST}:{tag}"], report_path=None)
    assert promoted == [(f"{host}/{DST}:{tag}", digest)]
    found_digest, found, _ = fetch_documents(f"{host}/{DST}:{tag}")
    assert found_digest == digest
    assert {k: a.manifest_digest for k, a in found.items()} == {
        "sbom": attached[0].digest,
        "provenance": attached[1].digest,
    }
    assert fetch_documents(f"{host}/{DST}@{child_digest}")[1]["sbom"].payload == SBOM


def test_promotion_by_digest_keeps_the_documents(anonymous_registry: str) -> None:
    host = anonymous_registry
    digest, _ = fresh_image(host, SRC, "promote-me")
    subject = f"{host}/{SRC}@{digest}"
    attached = attach_documents(subject, DOCUMENTS)
    final = f"final-{uuid.uuid4().hex[:8]}"

    # inside the repository: nothing to copy, the documents refer to the digest the new tag names
    assert promote_by_digest(subject, [final]) == [(f"{host}/{SRC}:{final}", digest)]
    assert set(fetch_documents(f"{host}/{SRC}:{final}")[1]) == {"sbom", "provenance"}

    # into another repository: promote_by_digest alone leaves them behind, promotion copies them
    bare = f"bare-{uuid.uuid4().hex[:8]}"
    promote_by_digest(subject, [f"{host}/{DST}:{bare}"])
    assert fetch_documents(f"{host}/{DST}:{bare}")[1] == {}
    promote_in_registry(subject, [f"{host}/{DST}:{final}"], report_path=None)
    found_digest, found, path = fetch_documents(f"{host}/{DST}:{final}")
    assert found_digest == digest
    assert path == expected_path(host, DST, digest)
    assert {k: (a.manifest_digest, a.payload) for k, a in found.items()} == {
        "sbom": (attached[0].digest, SBOM),
        "provenance": (attached[1].digest, STATEMENT),
    }
    promote_in_registry(subject, [f"{host}/{DST}:{final}"], report_path=None)  # again: no duplicate
    assert len(referrers(f"{host}/{DST}@{digest}").descriptors) == 2


def test_docker_registry_2_8_takes_the_tag_path_and_altered_artifacts_are_refused(tmp_path: Path) -> None:
    """Our own docker-registry (its storage is ours to alter): the referrers API is missing (404), so
    the tag index is kept; an index entry swapped for another artifact, an artifact of another
    subject, and a document blob altered on disk are each refused."""
    host, process = start_registry(tmp_path / "registry")
    try:
        digest, _ = fresh_image(host, SRC, "mine")
        other, _ = fresh_image(host, SRC, "other")
        subject = f"{host}/{SRC}@{digest}"
        assert referrers_api_status(host, SRC, digest) == 404
        sbom, provenance = attach_documents(subject, DOCUMENTS)
        assert (sbom.path, provenance.path) == (PATH_TAG, PATH_TAG)
        pristine = tag_index(host, SRC, digest)
        assert [m["digest"] for m in pristine["manifests"]] == [sbom.digest, provenance.digest]
        tag = digest.replace(":", "-")

        def rewrite(entries: list[dict]) -> None:
            body = json.dumps({**pristine, "manifests": entries}).encode()
            put_manifest(host, SRC, tag, body, OCI_INDEX)

        swapped = [{**pristine["manifests"][0], "digest": provenance.digest}]
        rewrite(swapped)
        with pytest.raises(EnvbuildError, match="is not what its referrers entry says"):
            fetch_documents(subject)

        (foreign,) = attach_documents(f"{host}/{SRC}@{other}", DOCUMENTS[:1])
        rewrite([{**pristine["manifests"][0], "digest": foreign.digest}])
        with pytest.raises(EnvbuildError, match=f"refers to {other}"):
            fetch_documents(subject)

        rewrite(pristine["manifests"])
        assert fetch_documents(subject)[1]["sbom"].payload == SBOM
        layer = fetch_documents(subject)[1]["sbom"].manifest["layers"][0]["digest"].split(":")[1]
        data = tmp_path / "registry/storage/docker/registry/v2/blobs/sha256" / layer[:2] / layer / "data"
        data.write_bytes(SBOM.replace(b"1.6", b"9.9"))  # same size, other bytes
        with pytest.raises(EnvbuildError, match="does not match its digest"):
            fetch_documents(subject)
    finally:
        stop(process)
