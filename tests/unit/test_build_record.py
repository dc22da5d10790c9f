"""BuildRecord, the typed build record (issue 35 item 4): record.json keeps its bytes through it, a
field a record lacks stays absent, and a record.json of the wrong shape is named, not crashed on.

tests/fixtures/attest/record.json is a real `envbuild build --push` record (see its README entry);
the stage records below are what pipeline.new_record and the stages write, by the same calls.
"""

from __future__ import annotations

import json

import pytest

from envbuild.attest.provenance import record_byproduct
from envbuild.attest.record import BuildRecord, Images, problem
from envbuild.pipeline import new_record
from envbuild.stages.target import RecordFile, write_record
from tests.helpers import attest as A


def written(record: BuildRecord, tmp_path) -> bytes:
    path = tmp_path / "record.json"
    write_record(str(path), record)
    return path.read_bytes()


def test_a_real_record_json_round_trips_to_the_same_bytes(tmp_path) -> None:
    data = A.RECORD.read_bytes()
    document = json.loads(data)
    record = BuildRecord.from_json(document)
    assert record.to_json() == document
    assert written(record, tmp_path) == json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"
    # typed: the lists are tuples, the image ids a value of their own
    assert isinstance(record.tags, tuple) and isinstance(record.images, Images)
    assert record.images.promoted == document["images"]["promoted"]
    assert record.pushed[0]["digest"] == document["pushed"][0]["digest"]


def test_a_new_record_has_only_the_fields_a_target_starts_with() -> None:
    """A target that fails in render has no stack, platform or dependencies in its record.json: not
    nulls, which a reader would take for facts (an unplatformed image, no dependencies)."""
    document = new_record("default", None, "cpu").to_json()
    assert sorted(document) == sorted(
        [
            "target",
            "envbuild",
            "ok",
            "status",
            "stages",
            "images",
            "tags",
            "pushed",
            "smoke",
            "error",
            "lock_digest",
            "smoke_device",
            "started",
            "finished",
        ]
    )
    assert document["images"] == {} and document["stages"] == {} and document["tags"] == []


def test_with_makes_a_new_record_and_adds_its_fields() -> None:
    first = new_record("default", None, "cpu")
    second = first.with_(status="failed", platform=None)
    assert first.status == "started" and not first.has("platform")
    assert second.status == "failed" and second.has("platform") and second.to_json()["platform"] is None
    with pytest.raises(AttributeError):
        second.status = "promoted"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field colour"):
        first.with_(colour="red")


def test_a_stage_that_raises_after_its_outcome_leaves_it_in_the_record_file(tmp_path) -> None:
    """The audit stage adds the gate's document, writes, then raises when the gate failed: the
    runner's failure record must still carry the document (it is what the user reads)."""
    path = tmp_path / "record.json"
    record = RecordFile(str(path), new_record("default", None, "cpu"))
    try:
        record.update(status="auditing", audit={"ok": False})
        record.stage_done("audit", 0.0, ok=False)
        raise RuntimeError("the gate failed")
    except RuntimeError:
        record.update(status="failed", error="the gate failed")
        record.write()
    on_disk = json.loads(path.read_text())
    assert on_disk["audit"] == {"ok": False} and on_disk["status"] == "failed"
    assert on_disk["stages"]["audit"]["ok"] is False and "seconds" in on_disk["stages"]["audit"]


def test_keys_another_tool_added_are_kept_and_covered_by_the_byproduct() -> None:
    document = {**A.record(), "ci_run": "https://ci.example/42"}
    record = BuildRecord.from_json(document)
    assert record.extra == {"ci_run": "https://ci.example/42"}
    assert record.to_json() == document
    assert record_byproduct(record) != record_byproduct(BuildRecord.from_json(A.record()))


def test_without_drops_a_field_from_the_json() -> None:
    record = BuildRecord.from_json({**A.record(), "attestations": {"files": []}})
    assert "attestations" not in record.without(("attestations",)).to_json()
    assert "attestations" in record.to_json()


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("ok", "yes", "field ok is a string, not a boolean"),
        ("tags", ["a", 5], "field tags is not a list of strings"),
        ("images", {"built": 5}, "field images.built is not a string"),
        ("pushed", [{"tag": "x"}], "field pushed[0].digest is not a string"),
        ("stack", [], "field stack is a list, not an object"),
    ],
)
def test_a_record_of_the_wrong_shape_names_its_field(field, value, named) -> None:
    document = {**A.record(), field: value}
    assert problem(document) == named
    with pytest.raises(ValueError, match="field"):
        BuildRecord.from_json(document)


def test_a_record_nested_past_the_bound_is_refused() -> None:
    deep: object = "leaf"
    for _ in range(70):
        deep = [deep]
    assert "levels deep" in str(problem({**A.record(), "smoke": {"deep": deep}}))


def test_the_builders_take_a_parsed_record_and_name_a_wrong_field() -> None:
    """build_provenance(json.load(...)) is the documented recipe (docs/attest.md): a dict of the wrong
    shape is a UsageError naming the field, and a non-object one saying so, never an AttributeError."""
    from envbuild.attest.provenance import build_provenance
    from envbuild.errors import UsageError

    subjects = [(A.REPOSITORY, A.SUBJECT)]
    assert build_provenance(A.record(), subjects) == build_provenance(
        BuildRecord.from_json(A.record()), subjects
    )
    with pytest.raises(UsageError, match="field ok is a string"):
        build_provenance({**A.record(), "ok": "yes"}, subjects)
    with pytest.raises(UsageError, match="not a JSON object"):
        build_provenance([], subjects)  # type: ignore[arg-type]
