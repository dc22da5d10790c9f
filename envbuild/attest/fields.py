"""The names envbuild's SBOM and provenance use, and the accessors every reader goes through.

One list, as oci.labels is for image labels: the writers (attest.sbom, attest.provenance) and the
readers (attest.check, doctor, the tests) can never spell a property or a media type two ways. The
`envbuild:` property namespace is documented in docs/attest.md; a name is never reused with another
meaning.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# media types and predicate types (OCI artifacts, in-toto, DSSE)

SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"  # artifactType and layer type of an unsigned SBOM
STATEMENT_MEDIA_TYPE = "application/vnd.in-toto+json"  # artifactType and layer type of the provenance
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"  # the layer type of any signed document
DSSE_PAYLOAD_TYPE = STATEMENT_MEDIA_TYPE  # what a DSSE envelope's payloadType says: an in-toto Statement

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
SLSA_PREDICATE = "https://slsa.dev/provenance/v1"
# A signed SBOM is wrapped in a Statement first (as `cosign attest --type cyclonedx` does), so one
# DSSE envelope format covers both documents.
CYCLONEDX_PREDICATE = "https://cyclonedx.org/bom"

# SLSA v1 buildType and builder id: URIs naming envbuild's build, documented in docs/attest.md
BUILD_TYPE = "https://envbuild.dev/attest/build-type/v1"
BUILDER_ID = "https://envbuild.dev/attest/builder/v1"

# On an artifact manifest: which document it carries ("sbom" | "provenance"), beside artifactType
ANNOTATION_KIND = "io.envbuild.attest.kind"
KIND_SBOM = "sbom"
KIND_PROVENANCE = "provenance"
KINDS = {KIND_SBOM: SBOM_MEDIA_TYPE, KIND_PROVENANCE: STATEMENT_MEDIA_TYPE}  # kind -> artifactType

# The files `envbuild build` writes next to record.json
SBOM_FILE = "sbom.cdx.json"
PROVENANCE_FILE = "provenance.intoto.json"

# ---------------------------------------------------------------------------------------------
# CycloneDX properties in the envbuild: namespace. On the SBOM's metadata (the image as a whole):

P_TARGET = "envbuild:target"
P_PLATFORM = "envbuild:platform"  # linux/amd64 | linux/arm64
P_SPEC_DIGEST = "envbuild:spec-digest"  # "sha256:<hex>" of envbuild.toml's bytes, as the image label
P_LOCK_DIGEST = "envbuild:lock-digest"  # "sha256:<hex>" of envbuild.lock's bytes; absent: built unlocked
P_MATRIX_DIGEST = "envbuild:matrix-digest"  # "sha256:<hex>" of the matrix the stack was resolved with
P_IMAGE_DIGEST = "envbuild:image-digest"  # the subject: the pushed manifest digest (or local image id)
P_MIN_DRIVER = "envbuild:cuda:min-driver"  # the NVIDIA driver floor, e.g. "580.65.06"
P_REQUIRE_CUDA = "envbuild:cuda:nvidia-require-cuda"  # the image's NVIDIA_REQUIRE_CUDA, e.g. "cuda>=13.0"
P_GPU_ARCH = "envbuild:cuda:gpu-arch"  # the framework build's compiled architectures, "7.5;8.0;9.0"
P_AUDIT_SASS = (
    "envbuild:audit:sass"  # the SASS the audit gate found in the framework's libraries, "sm_80,sm_90"
)
P_AUDIT_PTX = "envbuild:audit:ptx"  # ... and the PTX, "compute_90"; absent: no device code (a CPU build)
P_AUDIT_VERDICTS = "envbuild:audit:verdicts"  # per GPU the target names, "sm_90=native,sm_89=ptx-only"
# one per library the team chose not to judge (--skip-audit, [audit] skip) that the image has:
# "libtorch_cuda.so: REASON (--skip-audit)"; absent: every library was judged
P_AUDIT_SKIPPED = "envbuild:audit:skipped"
P_COMPAT = "envbuild:cuda:compat"  # native | minor-version | forward (the matrix's compat mode)
# which copy of the CUDA libraries the framework loads (the stack's cuda_libraries, audit.loading):
P_CUDA_LOADED_FROM = "envbuild:cuda:loaded-from"  # framework-wheels | base-image | conda-env
P_CUDA_LOADED_PATH = "envbuild:cuda:loaded-path"  # e.g. "site-packages/nvidia/*/lib"
# CUDA libraries the audit gate found more than once (audit.duplicates): "libcupti=4,libnvperf_host=2"
P_AUDIT_DUPLICATES = "envbuild:audit:duplicates"
P_AUDIT_DUPLICATE_BYTES = "envbuild:audit:duplicate-bytes"  # the bytes of the copies not loaded
P_SMOKE_DEVICE = "envbuild:smoke:device"  # cpu | gpu
P_SMOKE_PASSED = "envbuild:smoke:passed"  # "true" | "false"
P_SMOKE_GATES = "envbuild:smoke:gates"  # the passed gates' names, comma-separated, sorted
P_SMOKE_REPORT_DIGEST = "envbuild:smoke:report-digest"  # as the io.envbuild.smoke.report-digest label

# ... and on components:
P_PACKAGE_INDEX = "envbuild:package:index"  # the index URL a Python package was locked from
P_PACKAGE_LAYER = "envbuild:package:layer"  # framework | user (the image layer it was installed in)
# base-image | framework | cuda-runtime | cudnn | nccl | python-package | os-package | conda-package
P_COMPONENT_ROLE = "envbuild:role"

# ---------------------------------------------------------------------------------------------
# the build record's attestation inputs (the render stage writes them, attest.inputs computes them);
# attest.record.BuildRecord types every field of the record:
#   started, finished: RFC 3339 UTC ("2026-12-01T05:40:00Z")
#   spec = {"path": "...envbuild.toml", "digest": "sha256:<hex of the file's bytes>"}
#   base_image: the FROM reference (name:tag@sha256:... when locked or pinned)
#   nvidia_require_cuda: the image's NVIDIA_REQUIRE_CUDA, or None (a base image sets it)
#   dependencies: [{"name", "version", "layer", "index", "hashes": ["sha256:<hex>", ...],
#                   "file": the wheel's file name in the build context, or None,
#                   "file_hash": that file's "sha256:<hex>" (one of hashes), or None}]
#   lock_digest: "sha256:<hex>" of envbuild.lock, or None
#   stack: the stack document (framework, cuda, cudnn, nccl, min_driver, arch, matrix_digest...)
RECORD_INPUTS = ("started", "finished", "spec", "base_image", "nvidia_require_cuda", "dependencies")

# ---------------------------------------------------------------------------------------------
# provenance (attest.provenance) and its checks (attest.check)
# record.json keys written only after the attestations are attached (their own digests): left out of
# the provenance's record byproduct, so the provenance rebuilt from the final record.json is the same
RECORD_AFTER_ATTACH = ("attestations",)
RECORD_BYPRODUCT = "record.json"  # runDetails.byproducts[].name of the build record
RECORD_MEDIA_TYPE = "application/json"
ROLE_FRAMEWORK = "framework"  # P_COMPONENT_ROLE values the checks read
ROLE_CUDA_RUNTIME = "cuda-runtime"
SIGN_KEY_PASSWORD_ENV = "ENVBUILD_SIGN_KEY_PASSWORD"  # the passphrase of an encrypted --sign-key


def _object(value: object) -> dict:
    """`value` when it is a JSON object, else {}: the documents read here come from a registry, and a
    `"metadata": 5` or `"subject": [5]` must be a failed check, not an AttributeError (issue 33)."""
    return value if isinstance(value, dict) else {}


def _array(value: object) -> list:
    """`value` when it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def sbom_component_version(sbom: dict, role: str) -> str | None:
    """The version of the SBOM's first component whose P_COMPONENT_ROLE property is `role`, or None."""
    for component in _array(_object(sbom).get("components")):
        if not isinstance(component, dict):
            continue
        for item in _array(component.get("properties")):
            if isinstance(item, dict) and item.get("name") == P_COMPONENT_ROLE and item.get("value") == role:
                version = component.get("version")
                return version if isinstance(version, str) else None
    return None


def _metadata_properties(sbom: dict) -> list:
    return _array(_object(_object(sbom).get("metadata")).get("properties"))


def sbom_property(sbom: dict, name: str) -> str | None:
    """The value of the SBOM's metadata property `name` (the first, if repeated), or None."""
    for item in _metadata_properties(sbom):
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None


def sbom_properties(sbom: dict, name: str) -> list[str]:
    """Every value of the SBOM's metadata property `name`, in order (envbuild:audit:skipped repeats)."""
    return [
        item["value"]
        for item in _metadata_properties(sbom)
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get("value"), str)
    ]


def subject_digests(statement: dict) -> list[str]:
    """ "sha256:<hex>" of every subject of an in-toto Statement (subjects of another shape: none)."""
    found = []
    for subject in _array(_object(statement).get("subject")):
        digest = _object(_object(subject).get("digest")).get("sha256")
        if isinstance(digest, str):
            found.append("sha256:" + digest)
    return found


def _build_definition(statement: dict) -> dict:
    return _object(_object(_object(statement).get("predicate")).get("buildDefinition"))


def provenance_lock_digest(statement: dict) -> str | None:
    """ "sha256:<hex>" of the lock the image was built from: internalParameters.lockDigest."""
    value = _object(_build_definition(statement).get("internalParameters")).get("lockDigest")
    return value if isinstance(value, str) else None


def provenance_spec_digest(statement: dict) -> str | None:
    """ "sha256:<hex>" of the spec file's bytes (the io.envbuild.spec-digest label):
    externalParameters.spec.digest.sha256."""
    spec = _object(_object(_build_definition(statement).get("externalParameters")).get("spec"))
    digest = _object(spec.get("digest")).get("sha256")
    return "sha256:" + digest if isinstance(digest, str) else None
