"""A build record's facts for an image promoted outside `envbuild build`: read from its labels.

`envbuild promote IMAGE --report FILE --push` (and `envbuild attest --attach` without --record) have no
record.json: the image's io.envbuild.* labels carry the stack render wrote, and the trusted report
carries the smoke step. The record shape is the one pipeline writes, so one SBOM and one provenance
builder serve both; what only a build knows (the lock's hashes, the build's times, the engine) is
absent, and the documents say so by leaving those fields empty.
"""

from __future__ import annotations

from envbuild import __version__
from envbuild.attest.record import BuildRecord
from envbuild.oci import labels as names

_STACK_LABELS = {
    "framework": names.FRAMEWORK,
    "framework_version": names.FRAMEWORK_VERSION,
    "variant": names.VARIANT,
    "cuda": names.CUDA,
    "cudnn": names.CUDNN,
    "nccl": names.NCCL,
    "python": names.PYTHON,
    "min_driver": names.MIN_DRIVER,
    "compat": names.COMPAT,
    "arch": names.GPU_ARCH,
    "strategy": names.STRATEGY,
    "target": names.TARGET,
}


def _hex(digest: str | None) -> str | None:
    return digest.split(":", 1)[1] if digest and digest.startswith("sha256:") else None


def facts_from_image(
    labels: dict[str, str],
    *,
    image_id: str,
    device: str | None,
    report: dict | None,
    report_digest: str | None,
    pushed: list[dict],
    env: dict[str, str] | None = None,
) -> BuildRecord:
    """The build record (the shape pipeline writes) of the labelled image `image_id`."""
    stack = {key: labels.get(label) for key, label in _STACK_LABELS.items()}
    stack["spec_digest"] = _hex(labels.get(names.SPEC_DIGEST))
    stack["matrix_digest"] = None
    stack["base_image"] = labels.get("org.opencontainers.image.base.name")
    spec_digest = labels.get(names.SPEC_DIGEST)
    return BuildRecord.new(
        target=labels.get(names.TARGET),
        envbuild=__version__,
        built_by=labels.get(names.VERSION),
        ok=True,
        status="promoted",
        platform=labels.get(names.PLATFORM),
        stack=stack,
        images={"built": image_id, "promoted": image_id},
        tags=[entry["tag"] for entry in pushed],
        pushed=list(pushed),
        smoke=report,
        smoke_device=device,
        report_digest=report_digest,
        lock_digest=None,
        engine=None,
        backend=None,
        started=None,
        finished=None,
        spec={"path": None, "digest": spec_digest},
        base_image=labels.get("org.opencontainers.image.base.name"),
        nvidia_require_cuda=(env or {}).get("NVIDIA_REQUIRE_CUDA"),
        dependencies=[],
    )
