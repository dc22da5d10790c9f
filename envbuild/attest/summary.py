"""The one line `envbuild doctor --image` prints about an image's attestations.

doctor (envbuild.host) calls attestation_line and never fails because of it: whatever it raises
becomes a note. The fetching and judging live elsewhere in envbuild.attest; this module only joins
them into a line, so doctor depends on one small, stable function.
"""

from __future__ import annotations

from envbuild.oci.reference import parse_reference


def attestation_line(image: str) -> str | None:
    """A one-line summary of the SBOM and provenance attached to `image` in its registry, or None
    when there is nothing to say.

    A local image (a reference without a registry digest, `name:tag`) has no attachments to read:
    they are attached to a pushed manifest's digest, so None.
    """
    reference = parse_reference(image)
    if reference.digest is None:
        return None
    from envbuild.attest.remote import attestation_line as judged_line

    return judged_line(image)
