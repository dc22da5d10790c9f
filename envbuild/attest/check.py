"""The judging `envbuild attest` does on an image's attachments, once they are fetched.

Fetching (the referrers API or the tag schema) is oci's job; this module only reads bytes, so every
verdict is testable without a registry. Each check has a name, and a failure says which check failed
and why: "attest exited 1" alone would leave a security reviewer guessing whether the SBOM was
changed, the subject swapped or the signature broken.

The checks, in order: both documents present; each attached to the subject digest (the artifact
manifest's `subject`); media types; signatures (with --key: each document is a DSSE envelope that
verifies; without: a signed document is "signed, not checked", not a failure); each statement's
subject; the provenance's types; the SBOM against the CycloneDX schema; the SBOM's image digest; the
lock digest the SBOM and the provenance name; and the image labels against both documents.
"""

from __future__ import annotations

import json

from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild.attest import fields
from envbuild.errors import EnvbuildError
from envbuild.oci import labels as L

SIGNED_NOT_CHECKED = "signed, not checked (no --key)"


class Fetched(Record):
    """One attachment as fetched: kind (fields.KIND_*), media_type (the layer's: SBOM_MEDIA_TYPE,
    STATEMENT_MEDIA_TYPE or DSSE_MEDIA_TYPE), payload (the layer's bytes), manifest_subject (the
    artifact manifest's subject digest)."""

    __slots__ = ("kind", "media_type", "payload", "manifest_subject")
    kind: str
    media_type: str
    payload: bytes
    manifest_subject: str


class Check(Record):
    """One named verdict: name (stable, e.g. "provenance subject"), ok, detail (what was seen)."""

    __slots__ = ("name", "ok", "detail")
    name: str
    ok: bool
    detail: str


class Judgement(Record):
    """Every check on one subject. signing: "verified" | "signed, not checked" | "unsigned";
    keyid: the verifying key's id when a key was given."""

    __slots__ = ("subject", "checks", "signing", "keyid")
    subject: str
    checks: tuple
    signing: str
    keyid: str | None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]

    def document(self) -> dict:
        """The --json form."""
        return {
            "subject": self.subject,
            "ok": self.ok,
            "signing": self.signing,
            "keyid": self.keyid,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


_DOCUMENT_TYPES = {
    fields.KIND_SBOM: (fields.SBOM_MEDIA_TYPE, fields.CYCLONEDX_PREDICATE),
    fields.KIND_PROVENANCE: (fields.STATEMENT_MEDIA_TYPE, fields.SLSA_PREDICATE),
}


def judge(
    subject_digest: str, labels: dict[str, str], documents: dict[str, Fetched], *, public_key=None
) -> Judgement:
    """Every check on the attachments of `subject_digest` (its manifest digest), against its labels."""
    from envbuild.attest import dsse

    checks: list[Check] = []
    add = checks.append
    keyid = dsse.keyid(public_key) if public_key is not None else None
    read: dict[str, dict] = {}  # kind -> the document (the SBOM, the provenance statement)
    raw_sbom: bytes | None = None
    signed: list[bool] = []
    for kind in (fields.KIND_SBOM, fields.KIND_PROVENANCE):
        fetched = documents.get(kind)
        if fetched is None:
            add(Check(name=f"{kind} present", ok=False, detail=f"no {kind} attached to {subject_digest}"))
            continue
        add(Check(name=f"{kind} present", ok=True, detail=f"{fetched.media_type}"))
        add(
            _same(f"{kind} attached to subject", fetched.manifest_subject, subject_digest, "artifact subject")
        )
        plain_type, predicate_type = _DOCUMENT_TYPES[kind]
        if fetched.media_type not in (plain_type, fields.DSSE_MEDIA_TYPE):
            add(
                Check(
                    name=f"{kind} media type",
                    ok=False,
                    detail=f"{fetched.media_type!r}; expected {plain_type} or {fields.DSSE_MEDIA_TYPE}",
                )
            )
            continue
        is_signed = fetched.media_type == fields.DSSE_MEDIA_TYPE
        signed.append(is_signed)
        try:
            body = _open(kind, fetched, public_key, add)
        except EnvbuildError as exc:
            add(Check(name=f"{kind} signature", ok=False, detail=exc.message))
            continue
        if body is None:
            continue
        try:
            document = parse_json(body)
        except (ValueError, UnicodeDecodeError) as exc:
            add(Check(name=f"{kind} readable", ok=False, detail=f"not JSON: {exc}"))
            continue
        if not isinstance(document, dict):
            add(Check(name=f"{kind} readable", ok=False, detail="not a JSON object"))
            continue
        if is_signed or kind == fields.KIND_PROVENANCE:
            # a statement: the provenance always, a signed SBOM inside its wrapping statement
            add(_statement_type(kind, document, predicate_type))
            subjects = fields.subject_digests(document)
            shape = _subject_shape(document.get("subject"))
            add(
                Check(
                    name=f"{kind} statement subject",
                    ok=subject_digest in subjects,
                    detail=f"{', '.join(subjects) or shape or 'none'}"
                    + ("" if subject_digest in subjects else f"; expected {subject_digest}"),
                )
            )
            if kind == fields.KIND_SBOM:
                inner = document.get("predicate")
                if not isinstance(inner, dict):
                    add(
                        Check(
                            name="sbom readable",
                            ok=False,
                            detail="the signed statement has no SBOM predicate",
                        )
                    )
                    continue
                try:
                    body = json.dumps(inner).encode("utf-8")
                except RecursionError:  # parsed at the parser's depth limit, one level too deep to write
                    add(Check(name="sbom readable", ok=False, detail="the SBOM predicate nests too deep"))
                    continue
                document = inner
        if kind == fields.KIND_SBOM:
            raw_sbom = body
        read[kind] = document
    sbom, provenance = read.get(fields.KIND_SBOM), read.get(fields.KIND_PROVENANCE)
    if sbom is not None and raw_sbom is not None:
        add(_validates(raw_sbom))
        image = fields.sbom_property(sbom, fields.P_IMAGE_DIGEST)
        if image is not None:
            add(_same("sbom image digest", image, subject_digest, "subject"))
    if sbom is not None and provenance is not None:
        add(_lock_digest(sbom, provenance))
        add(_spec_digest(labels, sbom, provenance))
    if sbom is not None:
        # (check, label, the SBOM's value, where in the SBOM, same release is enough, absent label agrees);
        # absent smoke label: a CI candidate promoted by digest is never relabelled
        label_checks = (
            ("label smoke report digest", L.SMOKE_REPORT_DIGEST,
             fields.sbom_property(sbom, fields.P_SMOKE_REPORT_DIGEST), "sbom " + fields.P_SMOKE_REPORT_DIGEST,
             False, True),
            ("label framework version", L.FRAMEWORK_VERSION,
             fields.sbom_component_version(sbom, fields.ROLE_FRAMEWORK), "sbom framework component",
             True, False),
            ("label cuda", L.CUDA,
             fields.sbom_component_version(sbom, fields.ROLE_CUDA_RUNTIME), "sbom cuda-runtime component",
             True, False),
            ("label min driver", L.MIN_DRIVER,
             fields.sbom_property(sbom, fields.P_MIN_DRIVER), "sbom " + fields.P_MIN_DRIVER, False, False),
        )  # fmt: skip
        for name, label, value, where, release, unlabelled in label_checks:
            add(_label(name, labels, label, value, where, release=release, unlabelled=unlabelled))
    if signed and all(signed):
        signing = "verified" if public_key is not None else "signed, not checked"
    elif any(signed):
        signing = "partly signed"
    else:
        signing = "unsigned"
    return Judgement(subject=subject_digest, checks=tuple(checks), signing=signing, keyid=keyid)


def summary_line(judgement: Judgement) -> str:
    """One line for `doctor --image`: what is attached, how it is signed, how many checks passed."""
    total, failed = len(judgement.checks), judgement.failed
    short = judgement.subject[:19] + "…" if len(judgement.subject) > 19 else judgement.subject
    if judgement.signing == "verified":
        signing = f"signed (key {judgement.keyid[:8]}…)" if judgement.keyid else "signed"
    else:
        signing = judgement.signing
    if not failed:
        return f"attestations: SBOM + provenance for {short}, {signing}, {total}/{total} checks passed"
    first = failed[0]
    return (
        f"attestations for {short}: {len(failed)}/{total} checks failed, first {first.name!r}: {first.detail}"
    )


def _open(kind: str, fetched: Fetched, public_key, add) -> bytes | None:
    """The document's bytes: the layer itself, or a DSSE envelope's payload (verified with a key)."""
    from envbuild.attest import dsse

    if fetched.media_type != fields.DSSE_MEDIA_TYPE:
        if public_key is not None:
            add(
                Check(name=f"{kind} signature", ok=False, detail="not signed, but --key asks for a signature")
            )
            return None
        return fetched.payload
    envelope = dsse.parse_envelope(fetched.payload)
    if public_key is None:
        payload = dsse.envelope_payload(envelope)
        add(Check(name=f"{kind} signature", ok=True, detail=SIGNED_NOT_CHECKED))
        return payload
    payload = dsse.verify(envelope, public_key)
    add(Check(name=f"{kind} signature", ok=True, detail=f"verified with key {dsse.keyid(public_key)[:12]}…"))
    return payload


def _subject_shape(subject: object) -> str:
    """What is wrong with a statement's `subject` when it names no digest: said in the check's detail,
    so a `subject: 5` reads as a malformed statement, not as a statement about another image."""
    if not isinstance(subject, list):
        return f"subject is {_kind(subject)}, not a list of {{name, digest: {{sha256}}}}"
    if subject and not all(
        isinstance(item, dict) and isinstance(item.get("digest"), dict) for item in subject
    ):
        return "subject holds an entry that is not {name, digest: {sha256}}"
    return ""


def _kind(value: object) -> str:
    """A JSON value's type as an error message says it."""
    if value is None:
        return "missing"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), "an object")


def _statement_type(kind: str, document: dict, predicate_type: str) -> Check:
    seen = (document.get("_type"), document.get("predicateType"))
    ok = seen == (fields.STATEMENT_TYPE, predicate_type)
    detail = f"_type {seen[0]!r}, predicateType {seen[1]!r}"
    if not ok:
        detail += f"; expected {fields.STATEMENT_TYPE!r}, {predicate_type!r}"
    shape = _predicate_problem(document.get("predicate")) if predicate_type == fields.SLSA_PREDICATE else ""
    if shape:  # the types are right but the predicate is not a SLSA provenance: its readers see nothing
        ok, detail = False, f"{detail}; {shape}"
    return Check(name=f"{kind} statement type", ok=ok, detail=detail)


# what a SLSA v1 provenance predicate holds, and the JSON type of each (runDetails may be absent)
_SLSA_SHAPE = (
    ("buildDefinition", dict, True),
    ("buildDefinition.externalParameters", dict, True),
    ("buildDefinition.internalParameters", dict, False),
    ("buildDefinition.resolvedDependencies", list, False),
    ("runDetails", dict, False),
    ("runDetails.byproducts", list, False),
)


def _predicate_problem(predicate: object) -> str:
    """What makes `predicate` not a SLSA v1 provenance predicate ("" when nothing does): a
    `"predicate": []` or `"buildDefinition": 5` read as a provenance naming no lock and no spec."""
    if not isinstance(predicate, dict):
        return f"predicate is {_kind(predicate)}, not an object"
    for path, kind, required in _SLSA_SHAPE:
        parent, _, name = path.rpartition(".")
        holder = predicate.get(parent) if parent else predicate
        if not isinstance(holder, dict):
            continue  # its parent's own row said so
        value = holder.get(name)
        if value is None and not required:
            continue
        if not isinstance(value, kind):
            return f"predicate.{path} is {_kind(value)}, not {'an object' if kind is dict else 'a list'}"
    return ""


def _validates(body: bytes) -> Check:
    from envbuild.attest.sbom import validate_sbom

    try:
        validate_sbom(body)
    except EnvbuildError as exc:
        return Check(name="sbom valid", ok=False, detail=exc.message)
    return Check(name="sbom valid", ok=True, detail="CycloneDX 1.6 JSON schema")


def _lock_digest(sbom: dict, provenance: dict) -> Check:
    in_sbom = fields.sbom_property(sbom, fields.P_LOCK_DIGEST)
    in_provenance = fields.provenance_lock_digest(provenance)
    ok = in_sbom == in_provenance
    if ok:
        detail = in_sbom or "neither names a lock (built unlocked)"
    else:
        detail = f"sbom {in_sbom or 'none'}, provenance {in_provenance or 'none'}"
    return Check(name="lock digest", ok=ok, detail=detail)


def _spec_digest(labels: dict[str, str], sbom: dict, provenance: dict) -> Check:
    seen = {
        "label " + L.SPEC_DIGEST: labels.get(L.SPEC_DIGEST),
        "provenance": fields.provenance_spec_digest(provenance),
        "sbom " + fields.P_SPEC_DIGEST: fields.sbom_property(sbom, fields.P_SPEC_DIGEST),
    }
    values = set(seen.values())
    ok = len(values) == 1 and None not in values
    detail = next(iter(values)) if ok else ", ".join(f"{k} {v or 'none'}" for k, v in seen.items())
    return Check(name="label spec digest", ok=ok, detail=detail)


def _label(
    name: str,
    labels: dict[str, str],
    label: str,
    value: str | None,
    where: str,
    *,
    release: bool = False,
    unlabelled: bool = False,
) -> Check:
    """unlabelled: an image without the label agrees with any value (the smoke report of a candidate
    promoted by digest: `attest --attach --report` tied that report to the image id instead)."""
    have = labels.get(label)
    if have is None and value is None:
        return Check(name=name, ok=True, detail=f"neither {label} nor {where} is set")
    if have is None and unlabelled:
        return Check(name=name, ok=True, detail=f"{label} none (not relabelled), {where} {value}")
    ok = (
        have is not None and value is not None and (have == value or (release and _same_release(have, value)))
    )
    return Check(name=name, ok=ok, detail=f"{label} {have or 'none'}, {where} {value or 'none'}")


def _same_release(label: str, version: str) -> bool:
    """The label names a release ("2.13.0", CUDA "13.0"); the component may be a build of it
    ("2.13.0+cpu", "13.0.96"): the same when the label's numbers lead the component's public version."""
    public = version.split("+", 1)[0]
    want, have = label.split("."), public.split(".")
    return "+" not in label and len(have) >= len(want) and have[: len(want)] == want


def _same(name: str, seen: str | None, expected: str, what: str) -> Check:
    ok = seen == expected
    return Check(
        name=name, ok=ok, detail=f"{what} {seen or 'none'}" + ("" if ok else f"; expected {expected}")
    )
