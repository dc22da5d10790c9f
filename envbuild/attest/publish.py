"""Attestations for a promoted image: both documents built, written next to record.json, and attached
to every pushed digest.

The SBOM and the provenance are built from the record as it is written (redacted: no credential an
index URL or an Engine message carried can reach a document) and from what the promoted image holds
(image.inventory). With a signing key, each document is a DSSE envelope in the registry; the files
stay the plain documents, for people and CI artifacts to read. The key is loaded before anything is
read or pushed, so a bad key fails first.
"""

from __future__ import annotations

import json
import os

from envbuild._util.files import file_sha256, write_atomic
from envbuild._util.record import Record
from envbuild.attest import fields
from envbuild.attest.record import BuildRecord
from envbuild.oci.reference import split_tag


class Published(Record):
    __slots__ = ("files", "attached")
    files: tuple[str, ...]  # the documents written next to record.json
    attached: tuple[dict, ...]  # {"subject", "kind", "digest", "path"} per artifact pushed


def subjects_of(pushed: list[dict]) -> list[tuple[str, str]]:
    """(repository, "sha256:...") per distinct pushed manifest, in push order: several tags of one
    repository share one digest, and so one set of attachments."""
    seen: list[tuple[str, str]] = []
    for entry in pushed:
        subject = (split_tag(entry["tag"])[0], entry["digest"])
        if subject not in seen:
            seen.append(subject)
    return seen


def build_documents(
    record: BuildRecord, inventory: object, subject: tuple[str, str] | None
) -> tuple[dict, dict]:
    """(SBOM, provenance Statement) for one subject (None: the local image, by its id)."""
    from envbuild.attest.provenance import build_provenance
    from envbuild.attest.sbom import build_sbom, sbom_json, validate_sbom

    sbom = build_sbom(record, inventory, subject=subject)  # type: ignore[arg-type]
    validate_sbom(sbom_json(sbom))
    if subject is None:
        image_id = str((record.images and record.images.promoted) or "")
        name = (record.tags or [record.target or "image"])[0]
        subject = (split_tag(name)[0], image_id)
    return sbom, build_provenance(record, [subject])


def payloads(sbom: dict, statement: dict, key: object | None) -> list[tuple[str, bytes, str]]:
    """What is pushed: (kind, bytes, layer media type) per document; DSSE envelopes with a key."""
    from envbuild.attest.provenance import statement_bytes
    from envbuild.attest.sbom import sbom_json

    if key is None:
        return [
            (fields.KIND_SBOM, sbom_json(sbom), fields.SBOM_MEDIA_TYPE),
            (fields.KIND_PROVENANCE, statement_bytes(statement), fields.STATEMENT_MEDIA_TYPE),
        ]
    from envbuild.attest.dsse import sbom_statement, sign

    subjects = [(s["name"], "sha256:" + s["digest"]["sha256"]) for s in statement["subject"]]
    out = []
    for kind, inner in (
        (fields.KIND_SBOM, sbom_statement(sbom, subjects)),
        (fields.KIND_PROVENANCE, statement),
    ):
        envelope = sign(statement_bytes(inner), key)
        out.append((kind, (json.dumps(envelope, sort_keys=True) + "\n").encode(), fields.DSSE_MEDIA_TYPE))
    return out


def write_documents(directory: str, sbom: dict, statement: dict) -> tuple[str, ...]:
    from envbuild.attest.provenance import statement_bytes
    from envbuild.attest.sbom import sbom_json

    written = []
    for name, data in (
        (fields.SBOM_FILE, sbom_json(sbom)),
        (fields.PROVENANCE_FILE, statement_bytes(statement)),
    ):
        path = os.path.join(directory, name)
        write_atomic(path, data.decode("utf-8"))
        written.append(path)
    return tuple(written)


def publish(
    record: BuildRecord,
    image: str,
    *,
    directory: str | None,
    sign_key: str | None = None,
    docker_config: str | None = None,
    inventory: object | None = None,
) -> Published:
    """Build, write (into `directory`, when given) and attach (to every digest record.pushed
    names) the SBOM and provenance of the promoted image `image` (a local image id or name; with
    `inventory`, what was already read of it, e.g. from its registry)."""
    from envbuild.attest.attach import attach_documents
    from envbuild.image.inventory import read_inventory

    key = None
    if sign_key:
        from envbuild.attest.dsse import load_signing_key

        key = load_signing_key(sign_key)
    facts = record.without(fields.RECORD_AFTER_ATTACH).redacted()
    if inventory is None:
        inventory = read_inventory(image)
    subjects = subjects_of(facts.pushed or ())
    sbom, statement = build_documents(facts, inventory, subjects[0] if subjects else None)
    files = write_documents(directory, sbom, statement) if directory else ()
    attached: list[dict] = []
    for index, subject in enumerate(subjects):
        if index:
            sbom, statement = build_documents(facts, inventory, subject)
        repository, digest = subject
        documents = payloads(sbom, statement, key)
        pushed = attach_documents(f"{repository}@{digest}", documents, docker_config=docker_config)
        for (kind, _, _), item in zip(documents, pushed, strict=True):
            attached.append(
                {"subject": f"{repository}@{digest}", "kind": kind, "digest": item.digest, "path": item.path}
            )
    return Published(files=files, attached=tuple(attached))


def _read_json(path: str, flag: str) -> dict:
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular
    from envbuild._util.jsontext import parse_json
    from envbuild.errors import UsageError

    try:
        value = parse_json(read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8"))
    except NotReadable as exc:
        raise UsageError(
            f"{flag} {path} cannot be read ({exc})",
            fix="pass the file envbuild wrote (build/<target>/record.json, or verify --report's file)",
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            f"{flag} {path} cannot be read as JSON ({getattr(exc, 'strerror', None) or exc})",
            fix="pass the file envbuild wrote (build/<target>/record.json, or verify --report's file)",
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} {path} is not a JSON object", fix="pass the file envbuild wrote")
    return value


def _read_record(path: str) -> BuildRecord:
    """--record FILE, its shape checked (attest.record.problem): a UsageError naming the field otherwise."""
    from envbuild.errors import UsageError

    try:
        return BuildRecord.from_json(_read_json(path, "--record"))
    except ValueError as exc:
        raise UsageError(
            f"--record {path}: {exc}",
            fix="pass the record.json `envbuild build` wrote (build/<target>/record.json), unedited",
        ) from None


def _report_facts(path: str, labels: dict[str, str], image_id: str) -> tuple[dict, str, str]:
    """(report, device, report digest) of a `verify --report` file, when it is this image's: the
    image's io.envbuild.smoke.report-digest label names it (a locally promoted image), or it names
    this image id, unedited and passing (a registry-side promotion keeps the candidate's id)."""
    from envbuild.errors import EnvbuildError, PromoteError
    from envbuild.image.trust import trusted_report
    from envbuild.image.verify import REPORT_DIGEST, report_digest
    from envbuild.oci import labels as names

    document = _read_json(path, "--report")
    body = {key: value for key, value in document.items() if key != REPORT_DIGEST}
    digest = report_digest(body)
    labelled = labels.get(names.SMOKE_REPORT_DIGEST)
    if digest == document.get(REPORT_DIGEST) and digest == labelled:
        report = body.get("report")
        return dict(report) if isinstance(report, dict) else {}, str(body.get("device") or ""), digest
    if labelled:  # promoted with another report: documents naming this one would contradict its label
        raise EnvbuildError(
            f"--report {path} is not the smoke report this image was promoted with: its digest is "
            f"{digest}, the image's {names.SMOKE_REPORT_DIGEST} label says {labelled}",
            fix="pass the report file the image was promoted with (or its build's --record)",
        )
    try:
        trusted = trusted_report(path, image_id)
    except PromoteError as exc:
        raise EnvbuildError(
            exc.message.replace("refusing to promote", "refusing to attest")
            + f" (the image's {names.SMOKE_REPORT_DIGEST} label is "
            f"{labels.get(names.SMOKE_REPORT_DIGEST) or 'absent'})",
            fix="pass the unedited file `envbuild verify --report` wrote for this image",
        ) from None
    return trusted.report, trusted.device, trusted.digest


def _lock_facts(spec_path: str | None, labels: dict[str, str]) -> dict:
    """The lock's facts for an image built from it: {"lock_digest", "dependencies"} when the spec's
    envbuild.lock exists and was locked from the spec the image's label names; {} without a lock."""
    from envbuild.attest.inputs import dependencies
    from envbuild.errors import UsageError
    from envbuild.lockfile.model import lock_path
    from envbuild.lockfile.read import load_lock
    from envbuild.oci import labels as names

    if not spec_path:
        return {}
    path = lock_path(spec_path)
    if not os.path.exists(path):
        return {}
    lock, _ = load_lock(path)
    if "sha256:" + lock.spec_digest != labels.get(names.SPEC_DIGEST):
        raise UsageError(
            f"{path} was locked from spec sha256:{lock.spec_digest[:12]}…, but the image was built from "
            f"{labels.get(names.SPEC_DIGEST) or 'an unknown spec'}",
            fix="run attest in the checkout the image was built from, or pass -f for its spec",
        )
    target = lock.target(labels.get(names.TARGET) or "", labels.get(names.PLATFORM))
    if target is None:
        return {}
    return {"lock_digest": file_sha256(path), "dependencies": dependencies(target, "")}


def publish_promoted(promotion: object, *, report_path: str, sign_key: str | None) -> Published:
    """`envbuild promote IMAGE --report FILE --push`: attach the documents of the image just promoted,
    its facts read from its labels and the report (no build record: promote did not build it)."""
    from envbuild.attest.facts import facts_from_image
    from envbuild.image.local import local_image

    image_id = str(promotion.image_id)  # type: ignore[attr-defined]
    labels = local_image(image_id).labels
    report, device, digest = _report_facts(report_path, labels, image_id)
    facts = facts_from_image(
        labels,
        image_id=image_id,
        device=device,
        report=report,
        report_digest=digest,
        pushed=[{"tag": tag, "digest": d} for tag, d in promotion.pushed],  # type: ignore[attr-defined]
    )
    return publish(facts, image_id, directory=None, sign_key=sign_key)


def attach_image(
    ref: str,
    *,
    record_path: str | None,
    report_path: str | None,
    sign_key: str | None,
    spec_path: str | None = None,
) -> Published:
    """`envbuild attest IMAGE --attach`: the documents of an image already in a registry (pushed by
    bake or a CI builder), from its build record, or from its smoke report file plus the spec's
    envbuild.lock (the hashes), attached to its digest.

    The image is read from its registry (image.registry_inventory): its layers stream through, no
    Docker Engine is needed and no container runs, so a CI promote job without a daemon can attach.
    Its image id is the config digest, what `verify` recorded for the image it pulled."""
    from envbuild.attest.facts import facts_from_image
    from envbuild.errors import UsageError
    from envbuild.image.registry_inventory import read_registry_inventory
    from envbuild.oci.reference import parse_reference
    from envbuild.oci.registry import resolve_digest

    if not record_path and not report_path:  # before any request: a usage error costs nothing
        raise UsageError(
            "--attach needs the image's facts: --record build/<target>/record.json or --report FILE",
            fix="pass the build's record.json, or the smoke report file `envbuild verify --report` wrote",
        )
    # before any request, as above: a record of the wrong shape, or a FIFO given as a file, costs nothing
    recorded = _read_record(record_path) if record_path else _read_json(str(report_path), "--report")
    parsed = parse_reference(ref)
    digest = resolve_digest(ref)
    subject = f"{parsed.name}@{digest}"
    image = read_registry_inventory(subject)
    pushed = [{"tag": parsed.name, "digest": digest}]
    if isinstance(recorded, BuildRecord):
        facts = recorded
        promoted = facts.images.promoted if facts.images else None
        if promoted != image.image_id:
            raise UsageError(
                f"--record {record_path} describes image {promoted}, but {subject} is {image.image_id}",
                fix="pass the record.json of the build that pushed this digest",
            )
        if digest not in {entry.get("digest") for entry in facts.pushed or ()}:
            facts = facts.with_(pushed=pushed)
    else:
        report, device, report_digest = _report_facts(str(report_path), image.labels, image.image_id)
        facts = facts_from_image(
            image.labels,
            image_id=image.image_id,
            device=device,
            report=report,
            report_digest=report_digest,
            pushed=pushed,
        )
        facts = facts.with_(**_lock_facts(spec_path, image.labels))
    return publish(facts, image.image_id, directory=None, sign_key=sign_key, inventory=image.inventory)
