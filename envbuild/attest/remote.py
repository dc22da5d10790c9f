"""`envbuild attest IMAGE`: the attachments of an image's digest fetched from its registry and judged
against the image's own labels (attest.check), and the one line `doctor --image` prints of it."""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.attest.check import Fetched, Judgement, judge, summary_line


class Checked(Record):
    __slots__ = ("reference", "path", "judgement")
    reference: str  # REPO@sha256:... that was checked
    path: str  # how the registry listed the attachments: referrers-api | referrers-tag
    judgement: Judgement

    @property
    def ok(self) -> bool:
        return self.judgement.ok

    def document(self) -> dict:
        """The --json form: the judgement, with the reference and the registry path."""
        return {**self.judgement.document(), "reference": self.reference, "path": self.path}

    def text(self) -> str:
        lines = [f"attestations of {self.reference} ({self.path})"]
        for check in self.judgement.checks:
            lines.append(f"  {'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
        failed = self.judgement.failed
        total = len(self.judgement.checks)
        lines.append(
            f"{total - len(failed)}/{total} checks passed; signatures: {self.judgement.signing}"
            + (f" (key {self.judgement.keyid[:16]}…)" if self.judgement.keyid else "")
        )
        if failed:
            lines.append("failed: " + ", ".join(check.name for check in failed))
        return "\n".join(lines) + "\n"


def check_image(ref: str, *, key_path: str | None = None, docker_config: str | None = None) -> Checked:
    """Fetch and judge the SBOM and provenance attached to `ref` (REPO@sha256:... or REPO:TAG)."""
    from envbuild.attest.attach import fetch_documents
    from envbuild.oci.reference import parse_reference
    from envbuild.oci.registry import image_config_labels

    public_key = None
    if key_path:
        from envbuild.attest.dsse import load_public_key

        public_key = load_public_key(key_path)  # a bad key is exit 2 before any request
    name = parse_reference(ref).name
    digest, artifacts, path = fetch_documents(ref, docker_config=docker_config)
    reference = f"{name}@{digest}"
    labels = image_config_labels(reference, docker_config=docker_config)
    documents = {
        kind: Fetched(
            kind=kind,
            media_type=artifact.media_type,
            payload=artifact.payload,
            manifest_subject=artifact.subject_digest,
        )
        for kind, artifact in artifacts.items()
    }
    return Checked(
        reference=reference, path=path, judgement=judge(digest, labels, documents, public_key=public_key)
    )


def attestation_line(ref: str) -> str:
    """`doctor --image`'s one line for an image in a registry."""
    return summary_line(check_image(ref).judgement)
