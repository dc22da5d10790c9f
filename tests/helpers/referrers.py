"""Fresh images in a real registry for the referrers tests: each call makes a new digest, so documents
attached by an earlier run (the CI registry is shared and kept) never show in this one."""

from __future__ import annotations

import hashlib
import json
import uuid

import requests

from tests.helpers.registry import MANIFEST_V2, layerless_image

OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def put_blob(host: str, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    started = requests.post(f"http://{host}/v2/{repo}/blobs/uploads/", timeout=10)
    assert started.status_code == 202, started.text
    location = started.headers["Location"]
    url = location if "://" in location else f"http://{host}{location}"
    put = requests.put(url, params={"digest": digest}, data=data, timeout=10)
    assert put.status_code == 201, put.text
    return digest


def put_manifest(host: str, repo: str, reference: str, body: bytes, media_type: str) -> str:
    stored = requests.put(
        f"http://{host}/v2/{repo}/manifests/{reference}",
        data=body,
        headers={"Content-Type": media_type},
        timeout=10,
    )
    assert stored.status_code == 201, stored.text
    return stored.headers["Docker-Content-Digest"]


def fresh_image(host: str, repo: str, tag: str, architecture: str = "amd64") -> tuple[str, int]:
    """A new verified layerless image as `repo:tag`: (its manifest digest, the manifest's size)."""
    labels = {"io.envbuild.verified": "true", "io.envbuild.test.run": uuid.uuid4().hex}
    manifest, digest, config, _ = layerless_image(
        {"architecture": architecture, "os": "linux", "config": {"Labels": labels}}
    )
    put_blob(host, repo, config)
    assert put_manifest(host, repo, tag, manifest, MANIFEST_V2) == digest
    return digest, len(manifest)


def fresh_index(host: str, repo: str, tag: str) -> str:
    """A new OCI image index over two fresh images (amd64, arm64) as `repo:tag`; its digest."""
    entries = []
    for architecture in ("amd64", "arm64"):
        digest, size = fresh_image(host, repo, f"{tag}-{architecture}", architecture)
        entries.append(
            {
                "mediaType": MANIFEST_V2,
                "digest": digest,
                "size": size,
                "platform": {"os": "linux", "architecture": architecture},
            }
        )
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    return put_manifest(host, repo, tag, body, OCI_INDEX)


def referrers_api_status(host: str, repo: str, digest: str) -> int:
    """What GET /v2/<repo>/referrers/<digest> answers: 404 where the registry has no referrers API."""
    return requests.get(f"http://{host}/v2/{repo}/referrers/{digest}", timeout=10).status_code


def tag_index(host: str, repo: str, digest: str) -> dict:
    """The referrers tag index "sha256-<hex>" of `digest`, as stored."""
    got = requests.get(
        f"http://{host}/v2/{repo}/manifests/{digest.replace(':', '-')}",
        headers={"Accept": OCI_INDEX},
        timeout=10,
    )
    assert got.status_code == 200, got.text
    return got.json()
