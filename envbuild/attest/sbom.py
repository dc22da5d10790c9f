"""The image's SBOM: a CycloneDX 1.6 document of what it holds and of the GPU stack it was built for.

`build_sbom(record, inventory, subject=...)` joins the build record (record.json: the stack, the
locked wheels with their hashes and index, the smoke report) with what the image actually holds
(image.inventory: dpkg, the Python distributions, conda packages, the config's Env). It is a pure
function of the two: the timestamp is the record's "finished" and the serialNumber a uuid5 of the
subject and the record's digest, so a CI job rebuilds the same bytes from the same artifacts.

The document is built with cyclonedx-python-lib's model and written by its JSON 1.6 outputter (the
format is never written by hand here), then every string in it goes through envbuild's redaction, so
an index URL with `user:password@` never reaches a registry. Property names are attest.fields' only;
docs/attest.md ("## SBOM") says what each means. cyclonedx and packageurl are imported inside the
functions: `envbuild resolve` never loads them.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import datetime, timezone

from envbuild import __version__
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact, redact_values
from envbuild.attest import fields
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from envbuild.attest.record import BuildRecord
    from envbuild.image.inventory import Inventory

# envbuild:role values (attest.fields.P_COMPONENT_ROLE)
ROLE_BASE_IMAGE = "base-image"
ROLE_FRAMEWORK = "framework"
ROLE_CUDA_RUNTIME = "cuda-runtime"
ROLE_CUDNN = "cudnn"
ROLE_NCCL = "nccl"
ROLE_PYTHON = "python-package"
ROLE_OS = "os-package"
ROLE_CONDA = "conda-package"

_OS_RE = re.compile(r"^([a-z]+)-?(\d[\d.]*)$")  # a stack's os: debian12, ubuntu24.04
_CANONICAL_RE = re.compile(r"[-_.]+")


def _canonical(name: str) -> str:
    return _CANONICAL_RE.sub("-", name).lower()


def record_digest(record: BuildRecord) -> str:
    """ "sha256:<hex>" of the record's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(record.to_json(), sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _sha256(value: str | None) -> str | None:
    """The hex of "sha256:<hex>" (or of a bare hex), None for anything else."""
    if not isinstance(value, str):
        return None
    hexpart = value[7:] if value.startswith("sha256:") else value
    return hexpart.lower() if re.fullmatch(r"[0-9a-fA-F]{64}", hexpart) else None


def _prefixed(value: object) -> str | None:
    """A digest as "sha256:<hex>", whether the record wrote the prefix or not."""
    hexpart = _sha256(value) if isinstance(value, str) else None
    return "sha256:" + hexpart if hexpart else None


def _distro(stack: dict) -> tuple[str, str | None]:
    """(the deb purl namespace, its distro qualifier) of the stack's os: debian12 -> (debian, debian-12)."""
    match = _OS_RE.match(str(stack.get("os") or "").lower())
    if not match:
        return "debian", None
    return match.group(1), f"{match.group(1)}-{match.group(2)}"


def _gates(smoke: dict) -> str | None:
    gates = smoke.get("gates")
    if not isinstance(gates, dict):
        return None
    return ",".join(sorted(name for name, verdict in gates.items() if verdict == "passed"))


def _same_version(left: str, right: str) -> bool:
    from packaging.version import InvalidVersion, Version

    if left == right:
        return True
    try:
        return Version(left) == Version(right)
    except InvalidVersion:
        return False


def _image_identity(
    record: BuildRecord, subject: tuple[str, str] | None
) -> tuple[str, str, str | None, str | None]:
    """(name, digest, repository, tag) of the image the SBOM describes."""
    from envbuild.oci.reference import split_tag

    if subject is not None:
        repository, digest = subject
        return repository, digest, repository, None
    images = record.images
    digest = str((images and (images.promoted or images.built)) or "")
    tags = record.tags or (record.stack or {}).get("tags") or []
    if tags:
        repository, tag = split_tag(str(tags[0]))
        return str(tags[0]), digest, repository, tag
    return f"envbuild/{record.target or 'image'}", digest, None, None


def _oci_purl(repository: str | None, digest: str | None, tag: str | None, fallback: str) -> object:
    from packageurl import PackageURL

    name = (repository or fallback).rsplit("/", 1)[-1].lower()
    qualifiers = {}
    if repository:
        qualifiers["repository_url"] = repository
    if tag:
        qualifiers["tag"] = tag
    return PackageURL(type="oci", name=name, version=digest or None, qualifiers=qualifiers or None)


def _metadata_properties(
    record: BuildRecord, inventory: Inventory, digest: str
) -> list[tuple[str, str | None]]:
    stack = record.stack or {}
    smoke = record.smoke or {}
    spec = record.spec or {}
    passed = smoke.get("passed")
    return [
        (fields.P_TARGET, record.target or stack.get("target")),
        (fields.P_PLATFORM, record.platform or stack.get("platform")),
        (fields.P_SPEC_DIGEST, _prefixed(spec.get("digest")) or _prefixed(stack.get("spec_digest"))),
        (fields.P_LOCK_DIGEST, _prefixed(record.lock_digest)),
        (fields.P_MATRIX_DIGEST, _prefixed(stack.get("matrix_digest"))),
        (fields.P_IMAGE_DIGEST, digest or None),
        (fields.P_MIN_DRIVER, stack.get("min_driver")),
        (
            fields.P_REQUIRE_CUDA,
            record.nvidia_require_cuda or inventory.env.get("NVIDIA_REQUIRE_CUDA"),
        ),
        (fields.P_GPU_ARCH, stack.get("arch")),
        *_audited(record.audit),
        (fields.P_COMPAT, stack.get("compat")),
        *_loaded(stack),
        (fields.P_SMOKE_DEVICE, smoke.get("device_used") or record.smoke_device),
        (fields.P_SMOKE_PASSED, None if passed is None else ("true" if passed else "false")),
        (fields.P_SMOKE_GATES, _gates(smoke)),
        (fields.P_SMOKE_REPORT_DIGEST, _prefixed(record.report_digest)),
    ]


def build_sbom(record: BuildRecord | dict, inventory: Inventory, *, subject: tuple[str, str] | None) -> dict:
    """The CycloneDX 1.6 SBOM (as a JSON dict) of the image `record` built and `inventory` lists.

    subject: (repository, "sha256:<manifest digest>") of the pushed image; None for a local-only build,
    which is then named by its first tag and identified by record.images.promoted (its image id).
    """
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    # redacted going in (a value the purl encoder percent-encodes would hide its secret from a later
    # pass) and coming out (anything the library wrote from it)
    from envbuild.attest.record import as_record

    record = as_record(record).redacted()
    stack = record.stack or {}

    def props(*pairs: tuple[str, object]) -> list:
        return [Property(name=name, value=str(value)) for name, value in pairs if value not in (None, "")]

    def sha256s(values: list[str]) -> list:
        return [
            HashType(alg=HashAlgorithm.SHA_256, content=h)
            for h in sorted({_sha256(v) for v in values} - {None})
        ]

    def packaged(
        purl: object,
        name: str,
        version: str,
        role: str,
        *,
        hashes: list[str] | None = None,
        extra: tuple[tuple[str, object], ...] = (),
        kind: object = ComponentType.LIBRARY,
    ) -> Component:
        """A component identified by its purl (its bom-ref too), with its role last among its properties."""
        return Component(
            type=kind,
            name=name,
            version=version,
            purl=purl,
            bom_ref=str(purl),
            hashes=sha256s(hashes or []) or None,
            properties=props(*extra, (fields.P_COMPONENT_ROLE, role)),
        )

    name, digest, repository, tag = _image_identity(record, subject)
    image_purl = _oci_purl(repository, digest, tag, name)
    root = Component(
        type=ComponentType.CONTAINER,
        name=name,
        version=digest or None,
        purl=image_purl,
        bom_ref=str(image_purl),
    )
    finished = str(record.finished or "1970-01-01T00:00:00Z").replace("Z", "+00:00")
    metadata = BomMetaData(
        component=root,
        timestamp=datetime.fromisoformat(finished).astimezone(timezone.utc),
        properties=props(*_metadata_properties(record, inventory, digest)),
    )
    metadata.tools.components.add(
        Component(type=ComponentType.APPLICATION, name="envbuild", version=__version__)
    )
    seed = f"{repository or name}@{digest}|{record_digest(record)}"
    bom = Bom(metadata=metadata, serial_number=uuid.uuid5(uuid.NAMESPACE_URL, "envbuild:sbom:" + seed))

    components: list = []

    # the base image, the framework and the GPU libraries the stack names
    base = str(record.base_image or stack.get("base_image") or "")
    if base:
        base_name, _, base_digest = base.partition("@")
        base_repo, base_tag = _split(base_name)
        purl = _oci_purl(base_repo, base_digest or None, base_tag, base_repo)
        components.append(
            packaged(
                purl,
                base_repo,
                base_digest or base_tag,
                ROLE_BASE_IMAGE,
                hashes=[base_digest] if base_digest else None,
                kind=ComponentType.CONTAINER,
            )
        )
    if stack.get("framework"):
        components.append(
            Component(
                type=ComponentType.FRAMEWORK,
                name=str(stack["framework"]),
                version=str(stack.get("framework_version") or "") or None,
                bom_ref=f"envbuild:framework:{stack['framework']}",
                properties=props((fields.P_COMPONENT_ROLE, ROLE_FRAMEWORK)),
            )
        )
    for key, role, label in (
        ("cuda", ROLE_CUDA_RUNTIME, "cuda-runtime"),
        ("cudnn", ROLE_CUDNN, "cudnn"),
        ("nccl", ROLE_NCCL, "nccl"),
    ):
        if stack.get(key):
            components.append(
                Component(
                    type=ComponentType.LIBRARY,
                    name=label,
                    version=str(stack[key]),
                    bom_ref=f"envbuild:{role}",
                    # the resolved stack's version (its matrix row, with its source), not a file read
                    # from the image: the envbuild:audit: properties say what the libraries carry
                    description=f"{label} of the resolved stack ({stack.get('variant') or 'matrix row'})",
                    properties=props((fields.P_COMPONENT_ROLE, role)),
                )
            )

    # Python distributions: what the image's Python imports, with the record's hashes and index
    locked: dict[str, list[dict]] = {}
    for dep in record.dependencies or ():
        if isinstance(dep, dict) and dep.get("name"):
            locked.setdefault(_canonical(str(dep["name"])), []).append(dep)
    for dist in inventory.python:
        matches = [d for d in locked.get(dist.name, ()) if _same_version(str(d.get("version")), dist.version)]
        hashes: list[str] = []
        for dep in matches:
            # the installed wheel's own hash where the build context had the file (it is one of the
            # lock's); else every hash the lock allows (an index install: any of them may be it)
            hashes.extend([dep["file_hash"]] if dep.get("file_hash") else dep.get("hashes") or ())
        index = next((str(d["index"]) for d in matches if d.get("index")), None)
        layer = next((str(d["layer"]) for d in matches if d.get("layer")), None)
        purl = PackageURL(type="pypi", name=dist.name, version=dist.version)
        components.append(
            packaged(
                purl,
                dist.name,
                dist.version,
                ROLE_PYTHON,
                hashes=hashes,
                extra=(
                    (fields.P_PACKAGE_INDEX, redact(index) if index else None),
                    (fields.P_PACKAGE_LAYER, layer),
                ),
            )
        )

    # Debian packages
    namespace, distro = _distro(stack)
    for package in inventory.os_packages:
        qualifiers = {"arch": package.architecture} if package.architecture else {}
        if distro:
            qualifiers["distro"] = distro
        purl = PackageURL(
            type="deb", namespace=namespace, name=package.name, version=package.version, qualifiers=qualifiers
        )
        components.append(packaged(purl, package.name, package.version, ROLE_OS))

    # conda packages
    for package in inventory.conda:
        qualifiers = {
            k: v
            for k, v in (("build", package.build), ("channel", package.channel), ("subdir", package.subdir))
            if v
        }
        purl = PackageURL(type="conda", name=package.name, version=package.version, qualifiers=qualifiers)
        components.append(
            packaged(
                purl,
                package.name,
                package.version,
                ROLE_CONDA,
                hashes=[package.sha256] if package.sha256 else None,
            )
        )

    seen: set[str] = set()
    unique = []
    for component in components:  # one bom-ref once: the first wins (a dpkg entry listed twice)
        if str(component.bom_ref) not in seen:
            seen.add(str(component.bom_ref))
            unique.append(component)
    bom.components.update(unique)
    bom.register_dependency(root, unique)
    document = json.loads(JsonV1Dot6(bom).output_as_string())
    return redact_values(document)  # type: ignore[return-value]


def _split(reference: str) -> tuple[str, str | None]:
    from envbuild.oci.reference import split_tag

    colon, slash = reference.rfind(":"), reference.rfind("/")
    return split_tag(reference) if colon > slash else (reference, None)


def sbom_json(bom: dict) -> bytes:
    """The SBOM's bytes as envbuild writes and pushes them: sorted keys, two-space indent, a newline."""
    return (json.dumps(bom, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def validate_sbom(data: bytes) -> None:
    """Check `data` against CycloneDX 1.6's strict JSON schema; an EnvbuildError names the first error
    and where it is (a JSON path such as $.components[3].type)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from envbuild._util.jsontext import parse_json

    try:
        text = data.decode("utf-8")
        parse_json(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EnvbuildError(
            f"the SBOM is not JSON: {exc}", fix="rebuild it with `envbuild build` (sbom.cdx.json)"
        ) from None
    try:
        error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    except RecursionError:  # the schema check recurses per level: 200 nested components ended in a crash
        raise EnvbuildError(
            "the SBOM nests deeper than the CycloneDX schema check follows (components within components "
            "hundreds of levels deep)",
            fix="an SBOM edited or written by another tool: rebuild it with `envbuild build` (sbom.cdx.json)",
        ) from None
    if error is None:
        return
    detail = error.data
    path = getattr(detail, "json_path", None) or "$"
    message = getattr(detail, "message", None) or str(detail)
    raise EnvbuildError(
        f"the SBOM does not match the CycloneDX 1.6 schema at {path}: {message[:300]}",
        fix="an SBOM edited or written by another tool: rebuild it with `envbuild build` (sbom.cdx.json)",
    )


def _loaded(stack: dict) -> list[tuple[str, str | None]]:
    """Which copy of the CUDA libraries the framework loads: the stack's statement (plan.plan, from
    the strategy and the framework: audit.loading), absent from a record that does not make it."""
    loaded = stack.get("cuda_libraries")
    if not isinstance(loaded, dict):
        return []
    return [
        (fields.P_CUDA_LOADED_FROM, loaded.get("loaded_from")),
        (fields.P_CUDA_LOADED_PATH, loaded.get("path")),
    ]


def _audited(audit: object) -> list[tuple[str, str | None]]:
    """What the audit gate measured in the framework's libraries (record.audit): the SASS and PTX
    architectures it found, and its verdict per GPU the target names. A CPU build has neither. Each
    library the team chose not to judge, and that the image has, is one envbuild:audit:skipped (a
    CycloneDX property name may repeat), so a reader sees what the verdicts do not cover."""
    if not isinstance(audit, dict):
        return []
    libraries = [  # a skipped library was not judged: what it carries is no verdict's ground
        lib
        for lib in audit.get("libraries") or ()
        if isinstance(lib, dict) and lib.get("counts") and not lib.get("skipped")
    ]
    sass = sorted({str(arch) for lib in libraries for arch in lib.get("sass") or ()})
    ptx = sorted({str(arch) for lib in libraries for arch in lib.get("ptx") or ()})
    gpus = audit.get("gpus") if isinstance(audit.get("gpus"), dict) else {}
    verdicts = sorted(
        f"{key}={entry['verdict']}"
        for key, entry in gpus.items()
        if isinstance(entry, dict) and entry.get("verdict")
    )
    duplicated = [d for d in audit.get("duplicates") or () if isinstance(d, dict) and d.get("library")]
    copies = ",".join(sorted(f"{d['library']}={len(d.get('copies') or ())}" for d in duplicated))
    wasted = audit.get("duplicate_bytes")
    skipped = [
        (fields.P_AUDIT_SKIPPED, f"{entry['library']}: {entry['reason']} ({entry['source']})")
        for entry in audit.get("skipped") or ()
        if isinstance(entry, dict) and entry.get("paths") and entry.get("library") and entry.get("reason")
    ]
    return [
        (fields.P_AUDIT_SASS, ",".join(sass) or None),
        (fields.P_AUDIT_PTX, ",".join(ptx) or None),
        (fields.P_AUDIT_VERDICTS, ",".join(verdicts) or None),
        (fields.P_AUDIT_DUPLICATES, copies or None),
        (fields.P_AUDIT_DUPLICATE_BYTES, wasted if duplicated and type(wasted) is int else None),
        *skipped,
    ]
