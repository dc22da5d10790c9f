"""Registry-side promotion by digest on a real registry: the same manifest under new tags, blobs
mounted across repositories, an index read for its amd64 labels, and refusals."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.registry import (
    fetch_manifest,
    image_config_labels,
    promote_by_digest,
    put_manifest,
    resolve_digest,
)
from tests.helpers.docker import BASE_IMAGE, docker
from tests.helpers.registry import delete_manifest, manifest_digest, push

pytestmark = pytest.mark.docker

SRC = "envbuild-test/promote-src"


DST = "envbuild-test/promote-dst"


MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"


NOT_VERIFIED = "was not verified by envbuild (no io.envbuild.verified label): refusing to promote"


@dataclass
class Pushed:
    registry: str
    verified: str  # "<registry>/<SRC>:candidate"
    verified_digest: str
    unverified: str
    unverified_digest: str
    manifests: list[tuple[str, str]] = field(default_factory=list)  # (repo, digest) to delete


def build_and_push(directory: Path, tag: str, labels: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nLABEL {labels}\n")
    docker("build", "-q", "-t", tag, str(directory))
    push(tag)
    registry, _, rest = tag.partition("/")
    repo, _, name = rest.rpartition(":")
    return manifest_digest(registry, repo, name)


@pytest.fixture(scope="module")
def pushed(
    bookworm_image: str, anonymous_registry: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pushed]:
    run = uuid.uuid4().hex[:12]  # a fresh config, hence a fresh digest, per run
    verified = f"{anonymous_registry}/{SRC}:candidate"
    unverified = f"{anonymous_registry}/{SRC}:unverified"
    directory = tmp_path_factory.mktemp("promote")
    manifests: list[tuple[str, str]] = []
    try:
        verified_digest = build_and_push(
            directory / "verified",
            verified,
            f'io.envbuild.verified="true" io.envbuild.smoke.device="cpu" io.envbuild.test.run="{run}"',
        )
        manifests.append((SRC, verified_digest))
        unverified_digest = build_and_push(
            directory / "unverified", unverified, f'io.envbuild.test.run="{run}-unverified"'
        )
        manifests.append((SRC, unverified_digest))
        yield Pushed(anonymous_registry, verified, verified_digest, unverified, unverified_digest, manifests)
    finally:
        for repo, digest in reversed(manifests):
            delete_manifest(anonymous_registry, repo, digest)
        docker("rmi", verified, unverified, check=False)


def tags_list(registry: str, repo: str) -> list[str]:
    response = requests.get(f"http://{registry}/v2/{repo}/tags/list", timeout=10)
    assert response.status_code == 200, response.text
    return response.json().get("tags") or []


def test_fetch_manifest_and_config_labels(pushed: Pushed) -> None:
    body, media_type, digest = fetch_manifest(pushed.verified)
    assert digest == pushed.verified_digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert media_type == json.loads(body)["mediaType"]
    assert fetch_manifest(f"{pushed.registry}/{SRC}@{digest}") == (body, media_type, digest)

    labels = image_config_labels(f"{pushed.registry}/{SRC}@{digest}")
    assert labels["io.envbuild.verified"] == "true"
    assert labels["io.envbuild.smoke.device"] == "cpu"
    assert "io.envbuild.verified" not in image_config_labels(pushed.unverified)

    with pytest.raises(EnvbuildError) as missing:
        fetch_manifest(f"{pushed.registry}/{SRC}@sha256:{'0' * 64}")
    assert missing.value.message == f"manifest sha256:{'0' * 64} not found in {pushed.registry}/{SRC}"


def test_promote_by_digest_tags_the_same_manifest(pushed: Pushed) -> None:
    registry, digest = pushed.registry, pushed.verified_digest
    source = f"{registry}/{SRC}@{digest}"
    promoted = promote_by_digest(source, ["final", f"{registry}/{SRC}:v1"])

    assert promoted == [(f"{registry}/{SRC}:final", digest), (f"{registry}/{SRC}:v1", digest)]
    assert resolve_digest(f"{registry}/{SRC}:final") == digest
    assert resolve_digest(f"{registry}/{SRC}:v1") == digest
    assert {"candidate", "final", "v1"} <= set(tags_list(registry, SRC))
    # byte for byte the pushed manifest
    assert fetch_manifest(f"{registry}/{SRC}:v1")[0] == fetch_manifest(source)[0]


def test_promote_into_another_repository_mounts_the_blobs(pushed: Pushed) -> None:
    registry, digest = pushed.registry, pushed.verified_digest
    pushed.manifests.append((DST, digest))
    promoted = promote_by_digest(f"{registry}/{SRC}@{digest}", [f"{registry}/{DST}:v1"])
    assert promoted == [(f"{registry}/{DST}:v1", digest)]
    assert resolve_digest(f"{registry}/{DST}:v1") == digest
    assert image_config_labels(f"{registry}/{DST}:v1")["io.envbuild.verified"] == "true"


def test_promote_an_index_reads_the_amd64_labels(pushed: Pushed) -> None:
    registry = pushed.registry
    child, child_type, child_digest = fetch_manifest(pushed.verified)
    index = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_LIST,
        "manifests": [
            {
                "mediaType": child_type,
                "digest": pushed.unverified_digest,
                "size": len(fetch_manifest(pushed.unverified)[0]),
                "platform": {"architecture": "arm64", "os": "linux"},
            },
            {
                "mediaType": child_type,
                "digest": child_digest,
                "size": len(child),
                "platform": {"architecture": "amd64", "os": "linux"},
            },
        ],
    }
    body = json.dumps(index, indent=3).encode()
    index_digest = put_manifest(f"{registry}/{SRC}:index", body, MANIFEST_LIST)
    pushed.manifests.append((SRC, index_digest))
    assert index_digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert fetch_manifest(f"{registry}/{SRC}:index") == (body, MANIFEST_LIST, index_digest)
    assert image_config_labels(f"{registry}/{SRC}:index")["io.envbuild.verified"] == "true"

    pushed.manifests += [(DST, pushed.unverified_digest), (DST, child_digest), (DST, index_digest)]
    promoted = promote_by_digest(
        f"{registry}/{SRC}@{index_digest}", ["index-final", f"{registry}/{DST}:index"]
    )
    assert [d for _, d in promoted] == [index_digest, index_digest]
    assert resolve_digest(f"{registry}/{SRC}:index-final") == index_digest
    assert resolve_digest(f"{registry}/{DST}:index") == index_digest
    assert resolve_digest(f"{registry}/{DST}@{child_digest}") == child_digest


def test_unverified_unpinned_and_foreign_targets_are_refused(pushed: Pushed) -> None:
    registry = pushed.registry
    before = set(tags_list(registry, SRC))
    unverified = f"{registry}/{SRC}@{pushed.unverified_digest}"
    with pytest.raises(EnvbuildError) as refused:
        promote_by_digest(unverified, ["refused"])
    assert refused.value.message == f"{unverified} {NOT_VERIFIED}"
    assert f"envbuild verify {unverified}" in (refused.value.fix or "")

    with pytest.raises(UsageError):
        promote_by_digest(pushed.verified, ["refused"])
    with pytest.raises(UsageError, match="stays inside one registry"):
        promote_by_digest(f"{registry}/{SRC}@{pushed.verified_digest}", [f"ghcr.io/{SRC}:refused"])
    assert "refused" not in set(tags_list(registry, SRC)) - before


def test_promote_to_refuses_a_self_asserted_report(
    pushed: Pushed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's forged report, naming the registry image's own id: no smoke step ever ran on it."""
    registry = pushed.registry
    image = docker("image", "inspect", pushed.verified, "--format", "{{.Id}}").stdout.strip()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"image": image, "device": "gpu", "report": {"passed": True}}))
    source = f"{registry}/{SRC}@{pushed.verified_digest}"
    tag = f"self-asserted-{uuid.uuid4().hex[:8]}"
    code = main(["promote", source, "--to", tag, "--report", str(forged)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "envbuild verify" in err and "internal error" not in err
    assert tag not in tags_list(registry, SRC)
