"""BuildRecord: the build record (build/<target>/record.json) as a typed, frozen value.

The stages write it and attest reads it back: the SBOM and the provenance are functions of it, so a CI
job holding only record.json can rebuild them. Its JSON is a contract (docs/attest.md, the provenance's
record byproduct), so the value remembers which of its fields a record has: a target that failed in
render has no "stack" key, not a `"stack": null`, and `from_json(doc).to_json() == doc` for every
record envbuild writes. Keys another tool added are kept as they came (`extra`), since the byproduct
digest covers them.

The documents a record carries (the stack, the smoke report, the audit, each stage's entry, the
dependencies) are the JSON their own producers write and document; the record types its top level.

Why here, in attest: attest is the lowest package that reads a record, and stages, pipeline and the
CLI, which write one, are all above it.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Iterable

RECORD_DEPTH = 64  # envbuild's own record.json nests under 10 levels


class Images(Record):
    """record.json's "images": the untagged image the build made, and the id promote tagged."""

    __slots__ = ("built", "promoted")
    built: str | None
    promoted: str | None

    def to_json(self) -> dict:
        ids = (("built", self.built), ("promoted", self.promoted))
        return {name: value for name, value in ids if value is not None}


class RecordField(Record):
    """One top-level record.json field: its name, the JSON type(s) a read-back record must give it (None
    is always allowed: an absent fact; a wrong type was an AttributeError deep in a builder, issue 33),
    and what it holds (docs: reference/formats.md is generated from these)."""

    __slots__ = ("name", "types", "meaning")
    name: str
    types: type | tuple[type, ...]
    meaning: str


def _field(name: str, types: type | tuple[type, ...], meaning: str) -> RecordField:
    return RecordField(name=name, types=types, meaning=meaning)


FIELDS = (
    _field("target", str, "the target's name ([[target]] name, or default)"),
    _field("envbuild", str, "the version of envbuild that wrote the record"),
    _field("built_by", str, "a promoted image's io.envbuild.version label: the envbuild that built it"),
    _field("ok", bool, "whether the target passed: verified, or verified and promoted"),
    _field(
        "status",
        str,
        "where the build got to: started, auditing, verifying, promoting, verified (passed, not yet "
        "promoted), promoted, failed or interrupted",
    ),
    _field("error", str, "why the build failed or stopped; null when it did not"),
    _field("started", str, "when the build of the target started, RFC 3339 UTC (2026-12-01T05:40:00Z)"),
    _field("finished", str, "when it ended, RFC 3339 UTC"),
    _field("lock_digest", str, '"sha256:<hex>" of envbuild.lock; null: built unlocked'),
    _field("smoke_device", str, "gpu or cpu: the device the smoke step ran on"),
    _field(
        "stages",
        dict,
        "one entry per stage that ran (render, build, audit, verify, promote): its seconds and outcome",
    ),
    _field("images", dict, "built: the untagged image the build made; promoted: the image id promote tagged"),
    _field("tags", list, "the tags the image got (empty when it was not promoted)"),
    _field(
        "pushed", list, '[{"tag", "digest"}]: each tag pushed, with the manifest digest the registry gave'
    ),
    _field("smoke", dict, "the smoke report (envbuild/smoke/schema.json)"),
    _field(
        "report_digest",
        str,
        "the smoke report's digest, as the promoted image's io.envbuild.smoke.report-digest label",
    ),
    _field("stack", dict, "the stack document render wrote (its stack.json)"),
    _field("engine", (str, dict), "the container engine that built the image, and its version"),
    _field("backend", (str, dict), "how it built: buildkit (the docker CLI) or api (the Engine API)"),
    _field("platform", str, "the platform the image was built for: linux/amd64 or linux/arm64"),
    _field("spec", dict, '{"path", "digest"}: envbuild.toml, and "sha256:<hex>" of its bytes'),
    _field("base_image", str, "the FROM reference (name:tag@sha256:... when locked or pinned)"),
    _field("nvidia_require_cuda", str, "the image's NVIDIA_REQUIRE_CUDA; null where the base image sets it"),
    _field(
        "dependencies",
        list,
        '[{"name", "version", "layer", "index", "hashes", "file", "file_hash"}]: each locked Python '
        "package, with the wheel file the build installed and its hash",
    ),
    _field(
        "audit", dict, "the audit gate's document: the kernels found, the verdict per GPU, what it skipped"
    ),
    _field("labels", dict, "a verified, unpromoted image's: the labels promote would give it"),
    _field("plan_tags", list, "... and the tags it would get"),
    _field(
        "attestations", dict, '{"files", "attached", "seconds"}: the SBOM and provenance written and attached'
    ),
    _field(
        "platforms", dict, 'a target of several platforms: {platform: {"image", "tags"}}, one per platform'
    ),
    _field("index", str, "... and the multi-platform index pushed over them"),
)
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {field.name: field.types for field in FIELDS}
_TUPLES = ("tags", "pushed", "dependencies", "plan_tags")  # JSON lists, kept as tuples
_JSON_NAMES = {str: "a string", dict: "an object", list: "a list", bool: "a boolean", int: "a number"}


class BuildRecord(Record):
    """One target's record. `keys`: the record.json keys it has (a field not among them is absent, and
    None); `extra`: keys envbuild does not know, kept for the round trip. Make one with `new()` or
    `from_json()`, change it with `with_()`: each returns a new record."""

    __slots__ = (*FIELD_TYPES, "keys", "extra")
    target: str | None
    envbuild: str | None
    built_by: str | None
    ok: bool | None
    status: str | None
    error: str | None
    started: str | None
    finished: str | None
    lock_digest: str | None
    smoke_device: str | None
    stages: dict | None
    images: Images | None
    tags: tuple[str, ...] | None
    pushed: tuple[dict, ...] | None
    smoke: dict | None
    report_digest: str | None
    stack: dict | None
    engine: str | dict | None
    backend: str | dict | None
    platform: str | None
    spec: dict | None
    base_image: str | None
    nvidia_require_cuda: str | None
    dependencies: tuple[dict, ...] | None
    audit: dict | None
    labels: dict | None
    plan_tags: tuple[str, ...] | None
    attestations: dict | None
    platforms: dict | None
    index: str | None
    keys: tuple[str, ...]
    extra: dict

    @classmethod
    def new(cls, **fields: object) -> BuildRecord:
        """A record with exactly these fields (images, tags and the other lists as their JSON would be)."""
        return cls.of_fields({name: None for name in FIELD_TYPES}, (), {}).with_(**fields)

    @classmethod
    def of_fields(cls, values: dict, keys: Iterable[str], extra: dict) -> BuildRecord:
        return cls(**values, keys=tuple(keys), extra=extra)

    def with_(self, **changes: object) -> BuildRecord:
        """A copy with these fields set (and present): lists become tuples, images an Images."""
        unknown = [name for name in changes if name not in FIELD_TYPES]
        if unknown:
            raise TypeError(f"BuildRecord has no field {', '.join(unknown)}")
        values = {name: getattr(self, name) for name in FIELD_TYPES}
        for name, value in changes.items():
            values[name] = _typed(name, value)
        keys = self.keys + tuple(name for name in changes if name not in self.keys)
        return BuildRecord.of_fields(values, keys, self.extra)

    def with_stage(self, name: str, entry: dict) -> BuildRecord:
        """A copy with stage `name`'s entry in "stages"."""
        return self.with_(stages={**(self.stages or {}), name: entry})

    def without(self, names: Iterable[str]) -> BuildRecord:
        """A copy without these fields (absent from its JSON)."""
        dropped = set(names)
        values = {name: None if name in dropped else getattr(self, name) for name in FIELD_TYPES}
        keys = tuple(name for name in self.keys if name not in dropped)
        extra = {key: value for key, value in self.extra.items() if key not in dropped}
        return BuildRecord.of_fields(values, keys, extra)

    def has(self, name: str) -> bool:
        return name in self.keys

    def to_json(self) -> dict:
        """The record.json object: its fields that are present, then the keys it came with unknown."""
        out: dict = {}
        for name in self.keys:
            value = getattr(self, name)
            if isinstance(value, Images):
                value = value.to_json()
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, document: dict) -> BuildRecord:
        """The record a record.json object holds; ValueError (problem()'s text) when its shape is wrong."""
        found = problem(document)
        if found:
            raise ValueError(found)
        known = {key: value for key, value in document.items() if key in FIELD_TYPES}
        extra = {key: value for key, value in document.items() if key not in FIELD_TYPES}
        return cls.new(**known).of_extra(extra)

    def of_extra(self, extra: dict) -> BuildRecord:
        values = {name: getattr(self, name) for name in FIELD_TYPES}
        return BuildRecord.of_fields(values, self.keys, dict(extra))

    def redacted(self) -> BuildRecord:
        """The same record with `redact` applied to every string: what record.json and the documents
        carry (its error and smoke fields carry Engine and registry text)."""
        from envbuild._util.redact import redact_values

        return BuildRecord.from_json(redact_values(self.to_json()))  # type: ignore[arg-type]


def as_record(value: BuildRecord | dict) -> BuildRecord:
    """`value`, or the record a parsed record.json holds: the documents' builders take either, so the
    recipe docs/attest.md gives (json.load, then build_provenance) keeps working. UsageError naming
    the field when a parsed record has the wrong shape."""
    if isinstance(value, BuildRecord):
        return value
    from envbuild.errors import UsageError

    if not isinstance(value, dict):
        raise UsageError("the build record is not a JSON object", fix="pass the parsed record.json")
    try:
        return BuildRecord.from_json(value)
    except ValueError as exc:
        raise UsageError(
            f"the build record: {exc}", fix="pass the record.json `envbuild build` wrote, unedited"
        ) from None


def _typed(name: str, value: object) -> object:
    if name == "images" and isinstance(value, dict):
        built, promoted = value.get("built"), value.get("promoted")
        return Images(built=built, promoted=promoted)
    if name in _TUPLES and isinstance(value, list | tuple):
        return tuple(value)
    return value


def problem(document: dict) -> str | None:
    """What makes `document` (a record.json read back) unusable as the documents' facts, or None: each
    field has its JSON type, pushed[] and dependencies[] hold objects, pushed[]'s tag and digest and
    the image ids are strings. The record may have been edited or written by another tool, so a wrong
    shape is named here rather than crashing a builder (issue 33)."""
    if not isinstance(document, dict):
        return "it is not a JSON object"
    for name, kind in FIELD_TYPES.items():
        value = document.get(name)
        if value is not None and not isinstance(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            wanted = " or ".join(_JSON_NAMES[k] for k in kinds)
            return f"field {name} is {_JSON_NAMES.get(type(value), 'a number')}, not {wanted}"
    for index, entry in enumerate(document.get("pushed") or ()):
        if not (isinstance(entry, dict) and isinstance(entry.get("tag"), str)):
            return f"field pushed[{index}] is not an object with a string tag and digest"
        if not isinstance(entry.get("digest"), str):
            return f"field pushed[{index}].digest is not a string"
    for index, entry in enumerate(document.get("dependencies") or ()):
        if not isinstance(entry, dict):
            return f"field dependencies[{index}] is not an object"
        hashes = entry.get("hashes")
        if hashes is not None and not (isinstance(hashes, list) and all(isinstance(h, str) for h in hashes)):
            return f"field dependencies[{index}].hashes is not a list of strings"
    for name in ("built", "promoted"):
        value = (document.get("images") or {}).get(name)
        if value is not None and not isinstance(value, str):
            return f"field images.{name} is not a string"
    for name in ("tags", "plan_tags"):
        if not all(isinstance(tag, str) for tag in document.get(name) or ()):
            return f"field {name} is not a list of strings"
    if _depth(document) > RECORD_DEPTH:  # the builders and the redaction recurse per level: RecursionError
        return f"it nests more than {RECORD_DEPTH} levels deep (envbuild's own record nests under 10)"
    return None


def _depth(value: object) -> int:
    """How deep `value` nests (a string or number: 0), counted without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            if level <= RECORD_DEPTH:  # past the bound the answer is already "too deep"
                pending.extend(
                    (child, level) for child in (item.values() if isinstance(item, dict) else item)
                )
    return deepest
