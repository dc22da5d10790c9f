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

from envbuild._util.redact import redact_values
from envbuild.attest import fields
from envbuild.attest.statement import canonical_json, statement, statement_bytes
from envbuild.errors import UsageError
from envbuild.oci.reference import DOCKER_HUB, parse_reference

__all__ = ["build_provenance", "record_byproduct", "statement_bytes"]


def build_provenance(record: dict, subjects: list[tuple[str, str]]) -> dict:
    """The in-toto Statement (SLSA v1 provenance) of the image `record` describes, about `subjects`:
    [(name, "sha256:<hex>")], the promoted or pushed manifest digest(s)."""
    if not isinstance(record, dict):
        raise UsageError("the build record is not a JSON object", fix="pass the parsed record.json")
    record = redact_values(record)  # already redacted as written; a statement is published
    stack = record.get("stack") or {}
    external = {
        "spec": _spec(record),
        "target": record.get("target"),
        "platform": record.get("platform"),
        "smokeDevice": record.get("smoke_device"),
    }
    internal = {
        "matrixDigest": _prefixed(stack.get("matrix_digest")),
        "envbuildVersion": record.get("envbuild"),
    }
    if record.get("lock_digest"):
        internal["lockDigest"] = record["lock_digest"]
    dependencies = [_base_image(record)] if record.get("base_image") else []
    dependencies += [_wheel(dep) for dep in record.get("dependencies") or ()]
    metadata = {"startedOn": record.get("started"), "finishedOn": record.get("finished")}
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
                        "envbuild": record.get("envbuild"),
                        "engine": record.get("engine"),
                        "backend": record.get("backend"),
                    }
                ),
            },
            "metadata": _without_none(metadata),
            "byproducts": [record_byproduct(record)],
        },
    }
    return statement(subjects, fields.SLSA_PREDICATE, predicate)


def record_byproduct(record: dict) -> dict:
    """The build record as a ResourceDescriptor: its canonical JSON (less fields.RECORD_AFTER_ATTACH)
    inline as content, and that content's sha256."""
    kept = {key: value for key, value in record.items() if key not in fields.RECORD_AFTER_ATTACH}
    body = canonical_json(kept)
    return {
        "name": fields.RECORD_BYPRODUCT,
        "mediaType": fields.RECORD_MEDIA_TYPE,
        "digest": {"sha256": hashlib.sha256(body).hexdigest()},
        "content": base64.b64encode(body).decode("ascii"),
    }


def _spec(record: dict) -> dict:
    spec = record.get("spec") or {}
    out: dict = {}
    path = spec.get("path")
    if isinstance(path, str) and path:
        out["path"] = os.path.basename(path) if os.path.isabs(path) else path
    digest = _digest_map(spec.get("digest"))
    if digest:
        out["digest"] = digest
    return out


def _base_image(record: dict) -> dict:
    from packageurl import PackageURL

    written = record["base_image"]
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
    if record.get("platform"):
        qualifiers["platform"] = record["platform"]
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
