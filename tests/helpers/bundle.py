"""A bundle in the BUNDLE-FORMAT layout, written for the tests of `build/render --bundle` (issue 38).

Until `envbuild vendor` lands on this branch, the tests make their bundle here: the base image's
manifest, config and layers fetched from the registry with envbuild's own registry code
(envbuild.oci.registry: every blob checked against its digest), and the locked wheels (and uv's)
copied from the wheelhouse. At merge the coordinator switches the callers to `envbuild vendor`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from envbuild import __version__
from envbuild.lockfile.read import read_lock
from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import Repository, stream_layers


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_bundle(bundle: Path, lock_file: Path, wheelhouse: Path) -> dict:
    """Write BUNDLE/ for every target of the lock at lock_file; returns bundle.json's document."""
    read = read_lock(str(lock_file))
    files: list[dict] = []
    (bundle / "wheels").mkdir(parents=True)
    blobs = bundle / "oci" / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    pinned = {h.removeprefix("sha256:") for t in read.lock.targets for p in t.packages for h in p.hashes}
    for wheel in sorted(wheelhouse.glob("*.whl")):
        sha = _sha256(wheel)
        kind = "uv" if wheel.name.startswith("uv-") else "wheel"
        if kind == "wheel" and sha not in pinned:
            continue
        shutil.copyfile(wheel, bundle / "wheels" / wheel.name)
        files.append(
            {
                "path": f"wheels/{wheel.name}",
                "kind": kind,
                "sha256": sha,
                "size": wheel.stat().st_size,
                "source": str(wheel),
            }
        )
    index = []
    for target in read.lock.targets:
        ref = parse_reference(target.base_image)
        repository = Repository(target.base_image)
        body, media_type, digest = repository.manifest(ref.digest)
        manifest = json.loads(body)
        config = repository.blob(manifest["config"]["digest"])
        stored = [(digest, body), (manifest["config"]["digest"], config)]
        for layer_digest, _, reader in stream_layers(target.base_image):
            stored.append((layer_digest, reader.read()))
        for blob_digest, data in stored:
            hexed = blob_digest.removeprefix("sha256:")
            (blobs / hexed).write_bytes(data)
            files.append(
                {
                    "path": f"oci/blobs/sha256/{hexed}",
                    "kind": "blob",
                    "sha256": hexed,
                    "size": len(data),
                    "source": target.base_image,
                }
            )
        index.append(
            {
                "mediaType": media_type,
                "digest": digest,
                "size": len(body),
                "annotations": {
                    "org.opencontainers.image.ref.name": target.base_image,
                    "io.envbuild.platform": target.platform,
                },
            }
        )
    (bundle / "oci" / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (bundle / "oci" / "index.json").write_text(
        json.dumps(
            {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": index}
        )
    )
    unique = {f["path"]: f for f in files}
    document = {
        "bundle-version": 1,
        "envbuild": __version__,
        "lock-digest": read.digest,
        "targets": [
            {"name": t.name, "platform": t.platform, "base-image": t.base_image} for t in read.lock.targets
        ],
        "files": [unique[path] for path in sorted(unique)],
    }
    (bundle / "bundle.json").write_text(json.dumps(document, indent=2) + "\n")
    return document
