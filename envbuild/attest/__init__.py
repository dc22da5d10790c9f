"""Supply chain: what is in an image (a CycloneDX 1.6 SBOM), where it came from (SLSA v1 provenance in
an in-toto Statement), attached to the image's digest in its registry, optionally DSSE-signed, and
checked back by `envbuild attest`.

The build record (pipeline's `record.json`) is the one source of build facts: the provenance is a pure
function of it, and the SBOM is the record joined with what the image holds (image.inventory). The
names both documents use, and the accessors every reader goes through, are in attest.fields.
"""
