"""The SBOM and the provenance in the registry: attached to the image digest they describe, and read
back by kind for `envbuild attest`.

Each document is one OCI artifact (oci.referrers) whose artifactType is fields.KINDS[kind] and whose
fields.ANNOTATION_KIND annotation names the kind, so a reader tells an envbuild SBOM from any other
CycloneDX document attached to the same digest by another tool.
"""

from __future__ import annotations

from envbuild.attest import fields
from envbuild.errors import EnvbuildError, UsageError
from envbuild.oci.reference import parse_reference
from envbuild.oci.referrers import CREATED, Artifact, Attached, attach, fetch_artifact, referrers
from envbuild.oci.registry import resolve_digest


def attach_documents(
    subject: str, documents: list[tuple[str, bytes, str]], *, docker_config: str | None = None
) -> list[Attached]:
    """Attach each (kind, payload bytes, layer media type) of `documents` to `subject`
    ("registry/repo@sha256:..."); kind is one of fields.KINDS. Re-attaching a document is a no-op."""
    for kind, _, _ in documents:
        if kind not in fields.KINDS:
            raise UsageError(
                f"document kind {kind!r} is not one envbuild attaches",
                fix=f"use one of: {', '.join(sorted(fields.KINDS))}",
            )
    return [
        attach(
            subject,
            artifact_type=fields.KINDS[kind],
            payload=payload,
            media_type=media_type,
            annotations={fields.ANNOTATION_KIND: kind},
            docker_config=docker_config,
        )
        for kind, payload, media_type in documents
    ]


def fetch_documents(ref: str, *, docker_config: str | None = None) -> tuple[str, dict[str, Artifact], str]:
    """(the subject digest, {kind: the newest Artifact of that kind}, the path read) for `ref`
    ("registry/repo@sha256:..." or "registry/repo:tag", resolved to its digest first).

    Newest by the org.opencontainers.image.created annotation (RFC 3339 UTC sorts as text), then by
    digest so the choice never depends on listing order. Every artifact returned has been checked
    against its digests and refers to exactly this subject; one that does not is refused."""
    parsed = parse_reference(ref)
    digest = parsed.digest or resolve_digest(ref, docker_config=docker_config)
    subject = f"{parsed.name}@{digest}"
    listed = referrers(subject, docker_config=docker_config)
    newest: dict[str, tuple[tuple[str, str], dict]] = {}
    for descriptor in listed.descriptors:
        annotations = descriptor.get("annotations") or {}
        kind = annotations.get(fields.ANNOTATION_KIND) if isinstance(annotations, dict) else None
        if kind not in fields.KINDS or descriptor.get("artifactType") != fields.KINDS[kind]:
            continue  # another tool's document, or not one of ours
        key = (str(annotations.get(CREATED) or ""), str(descriptor["digest"]))
        if kind not in newest or key > newest[kind][0]:
            newest[kind] = (key, descriptor)
    found = {}
    for kind, (_, descriptor) in sorted(newest.items()):
        artifact = fetch_artifact(parsed.name, descriptor, docker_config=docker_config)
        if artifact.subject_digest != digest:
            raise EnvbuildError(
                f"the {kind} artifact {descriptor['digest']} listed for {subject} refers to "
                f"{artifact.subject_digest}",
                fix="the referrers index was altered: attach the documents again (envbuild attest)",
            )
        found[kind] = artifact
    return digest, found, listed.path
