"""SLSA v1 provenance for an image, as a pure function of its build record.

Why a pure function of record.json: a reviewer (or a CI job holding only the build artifact) can rebuild
the statement from the record and compare bytes with what the registry serves; nothing here reads the
clock, the environment or the network. The fields and the buildType are documented in docs/attest.md
("Provenance"); the names come from attest.fields.

Choices, each documented there:
- the spec path is kept as recorded when relative; an absolute path becomes its file name (a checkout
  location is machine-specific, and the digest is what identifies the file);
- an unlocked build has no internalParameters.lockDigest (SLSA omits unset fields);
- no metadata.invocationId: the record has no id a log system knows;
- the base image is a `pkg:docker` purl (the Package URL spec's docker type), with its manifest digest
  when the reference is pinned;
- a wheel's digest is the installed file's hash (file_hash) where the context had the file, else its
  first recorded hash; every hash is kept in its annotations;
- the record byproduct leaves out fields.RECORD_AFTER_ATTACH (written after the attestations exist).
"""

from __future__ import annotations

import base64
import hashlib
import os

from envbuild.attest import fields
from envbuild.attest.record import BuildRecord, as_record
from envbuild.attest.statement import canonical_json, statement, statement_bytes
from envbuild.errors import UsageError
from envbuild.oci.reference import DOCKER_HUB, parse_reference

__all__ = ["build_provenance", "record_byproduct", "statement_bytes"]


def build_provenance(record: BuildRecord | dict, subjects: list[tuple[str, str]]) -> dict:
    """The in-toto Statement (SLSA v1 provenance) of the image `record` describes, about `subjects`:
    [(name, "sha256:<hex>")], the promoted or pushed manifest digest(s). A parsed record.json will
    do as the record (attest.record.as_record)."""
    record = as_record(record).redacted()  # already redacted as written; a statement is published
    stack = record.stack or {}
    external = {
        "spec": _spec(record),
        "target": record.target,
        "platform": record.platform,
        "smokeDevice": record.smoke_device,
    }
    internal = {
        "matrixDigest": _prefixed(stack.get("matrix_digest")),
        "envbuildVersion": record.envbuild,
    }
    if record.lock_digest:
        internal["lockDigest"] = record.lock_digest
    dependencies = [_base_image(record)] if record.base_image else []
    dependencies += [_wheel(dep) for dep in record.dependencies or ()]
    metadata = {"startedOn": record.started, "finishedOn": record.finished}
    predicate = {
        "buildDefinition": {
            "buildType": fields.BUILD_TYPE,
            "externalParameters": _without_none(external),
            "internalParameters": _without_none(internal),
            "resolvedDependencies": dependencies,
        },
        "runDetails": {
            "builder": {
                "id": fields.BUILDER_ID,
                "version": _without_none(
                    {
                        "envbuild": record.envbuild,
                        "engine": record.engine,
                        "backend": record.backend,
                    }
                ),
            },
            "metadata": _without_none(metadata),
            "byproducts": [record_byproduct(record)],
        },
    }
    return statement(subjects, fields.SLSA_PREDICATE, predicate)


def record_byproduct(record: BuildRecord) -> dict:
    """The build record as a ResourceDescriptor: its canonical JSON (less fields.RECORD_AFTER_ATTACH)
    inline as content, and that content's sha256."""
    body = canonical_json(record.without(fields.RECORD_AFTER_ATTACH).to_json())
    return {
        "name": fields.RECORD_BYPRODUCT,
        "mediaType": fields.RECORD_MEDIA_TYPE,
        "digest": {"sha256": hashlib.sha256(body).hexdigest()},
        "content": base64.b64encode(body).decode("ascii"),
    }


def _spec(record: BuildRecord) -> dict:
    spec = record.spec or {}
    out: dict = {}
    path = spec.get("path")
    if isinstance(path, str) and path:
        out["path"] = os.path.basename(path) if os.path.isabs(path) else path
    digest = _digest_map(spec.get("digest"))
    if digest:
        out["digest"] = digest
    return out


def _base_image(record: BuildRecord) -> dict:
    from packageurl import PackageURL

    written = str(record.base_image)
    try:
        ref = parse_reference(written)
    except UsageError as exc:
        raise UsageError(
            f"record field base_image {written!r} is not an image reference: {exc.message}", fix=exc.fix
        ) from None
    path = ref.repository
    if ref.registry == DOCKER_HUB and path.startswith("library/"):
        path = path[len("library/") :]
    namespace, _, name = path.rpartition("/")
    qualifiers = {}
    if ref.registry != DOCKER_HUB:
        qualifiers["repository_url"] = ref.registry
    if record.platform:
        qualifiers["platform"] = record.platform
    purl = PackageURL(
        type="docker",
        namespace=namespace or None,
        name=name,
        version=ref.digest or ref.tag,
        qualifiers=qualifiers,
    )
    out = {"name": written, "uri": purl.to_string()}
    digest = _digest_map(ref.digest)
    if digest:
        out["digest"] = digest
    return out


def _wheel(dep: dict) -> dict:
    from packageurl import PackageURL

    hashes = [h for h in dep.get("hashes") or () if isinstance(h, str)]
    out: dict = {"uri": PackageURL(type="pypi", name=dep["name"], version=dep["version"]).to_string()}
    if dep.get("file"):
        out["name"] = dep["file"]
    installed = dep.get("file_hash") if isinstance(dep.get("file_hash"), str) else None
    digest = _digest_map(installed or hashes[0]) if hashes or installed else None
    if digest:
        out["digest"] = digest
    out["annotations"] = _without_none(
        {"index": dep.get("index"), "layer": dep.get("layer"), "file": dep.get("file"), "hashes": hashes}
    )
    return out


def _digest_map(value: object) -> dict | None:
    """ "sha256:<hex>" -> {"sha256": "<hex>"} (a DigestSet), or None."""
    if not isinstance(value, str) or ":" not in value:
        return None
    algorithm, _, hexdigest = value.partition(":")
    return {algorithm: hexdigest} if algorithm and hexdigest else None


def _prefixed(digest: object) -> str | None:
    """The stack's matrix digest is bare hex; the provenance spells every digest "sha256:<hex>"."""
    if not isinstance(digest, str) or not digest:
        return None
    return digest if ":" in digest else "sha256:" + digest


def _without_none(values: dict) -> dict:
    return {key: value for key, value in values.items() if value is not None}
