"""The declared keys of envbuild.toml (envbuild.spec.keys) are the keys the reader reads, with the
defaults it gives and the values it accepts (issue 39: the reference page is generated from them).

Each declaration is fed through the real reader (parse_spec, load_spec): a key it ignores, a default
that is not its own, or a list of accepted values that is not the one it checks with fails here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from envbuild.audit.skip import AuditSkip
from envbuild.errors import UsageError
from envbuild.spec import keys
from envbuild.spec.model import (
    BuildSpec,
    ImageSpec,
    Packages,
    SiteSpec,
    SmokeSpec,
    Spec,
    StackSpec,
    Target,
    load_spec,
    parse_spec,
)

MINIMAL = {"stack": {"driver": "550", "framework": "torch"}}
# the keys only a conda target reads: a spec that sets them needs one (the reader refuses them otherwise)
CONDA_ONLY = {("packages", "conda"), ("packages", "conda-channels")}
# where each table's keys land, independently of the declarations' `field`: the value types' own fields
VALUE_TYPES: dict[str, type] = {
    "stack": StackSpec,
    "packages": Packages,
    "image": ImageSpec,
    "smoke": SmokeSpec,
    "build": BuildSpec,
    "site": SiteSpec,
    "audit.skip": AuditSkip,
}
NOT_FROM_A_KEY = {("audit.skip", "source"), ("target", "stack")}  # set by the reader, not written


def parse(data: dict[str, Any], tmp_path: Path) -> Spec:
    return parse_spec(data, str(tmp_path / "envbuild.toml"), "0" * 64)


def value_of(spec: Spec, key: keys.SpecKey) -> Any:
    """Where the reader put `key`'s value, found through the Spec's own structure."""
    holder = {
        "stack": spec.targets[0].stack,
        "packages": spec.packages,
        "image": spec.image,
        "smoke": spec.smoke,
        "build": spec.build,
        "site": spec.site,
        "audit": spec,
        "target": spec.targets[0],
        "audit.skip": spec.audit_skip[0] if spec.audit_skip else None,
    }[key.table]
    return getattr(holder, key.field)


def with_value(key: keys.SpecKey, value: Any) -> dict[str, Any]:
    """The minimal spec with `key` set to `value` (and what it needs to be read at all)."""
    data = copy.deepcopy(MINIMAL)
    if (key.table, key.key) in CONDA_ONLY:
        data["stack"]["strategy"] = "conda"
    if key.table == "target":
        data["target"] = [{"name": "one", key.key: value} if key.key != "name" else {"name": value}]
    elif key.table == "audit.skip":
        entry = {other.key: other.example for other in keys.keys_of("audit.skip")}
        data["audit"] = {"skip": [{**entry, key.key: value}]}
    else:
        data.setdefault(key.table, {})[key.key] = value
    return data


NAMED = {f"{k.table}.{k.key}": k for k in keys.KEYS}
OPTIONAL = [name for name, k in NAMED.items() if not k.required]
WITH_CHOICES = [name for name, k in NAMED.items() if k.choices]
WITH_BOUNDS = [name for name, k in NAMED.items() if k.bounds]


def test_every_field_the_reader_fills_comes_from_exactly_one_declared_key() -> None:
    for table, value_type in VALUE_TYPES.items():
        fields = [f for f in value_type.__slots__ if (table, f) not in NOT_FROM_A_KEY]
        declared = [k.field for k in keys.keys_of(table)]
        assert sorted(declared) == sorted(fields), table
    assert [k.field for k in keys.keys_of("audit")] == ["audit_skip"]
    assert [f for f in Target.__slots__ if ("target", f) not in NOT_FROM_A_KEY] == ["name"]
    # every table the reader knows is declared, and every declared key belongs to one
    names = {t.name for t in keys.TABLES} | {"audit.skip"}
    assert {k.table for k in keys.KEYS} <= names
    assert set(Spec.__slots__) - {"path", "digest", "targets", "audit_skip"} == {
        "packages",
        "image",
        "smoke",
        "build",
        "mirrors",
        "site",
    } <= names


@pytest.mark.parametrize("table", [t.name for t in keys.TABLES if t.free_keys is None])
def test_an_undeclared_key_is_refused_naming_exactly_the_declared_ones(table: str, tmp_path: Path) -> None:
    data = copy.deepcopy(MINIMAL)
    if table == "target":
        data["target"] = [{"name": "one", "no-such-key": "x"}]
    else:
        data.setdefault(table, {})["no-such-key"] = "x"
    with pytest.raises(UsageError) as refused:
        parse(data, tmp_path)
    expected = [k.key for k in keys.keys_of(table)]
    if table == "target":
        expected += [k.key for k in keys.keys_of("stack")]
    assert "unknown key 'no-such-key'" in refused.value.message
    assert refused.value.fix is not None
    assert refused.value.fix.endswith("accepted keys: " + ", ".join(expected))


def test_an_unknown_table_is_refused_naming_every_declared_table(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        parse({**MINIMAL, "stackk": {}}, tmp_path)
    assert refused.value.fix is not None
    assert refused.value.fix.endswith("accepted keys: " + ", ".join(t.name for t in keys.TABLES))


def test_a_minimal_spec_reads_as_every_declared_default(tmp_path: Path) -> None:
    path = tmp_path / "envbuild.toml"
    path.write_text('[stack]\ndriver = "550"\nframework = "torch"\n')
    spec = load_spec(str(path))
    found = {name: value_of(spec, NAMED[name]) for name in OPTIONAL}
    assert found == {name: NAMED[name].default for name in OPTIONAL}


@pytest.mark.parametrize("name", [n for n, k in NAMED.items() if k.required])
def test_a_required_key_left_out_is_refused(name: str, tmp_path: Path) -> None:
    key = NAMED[name]
    data = with_value(key, key.example)
    container = {
        "stack": lambda: data["stack"],
        "target": lambda: data["target"][0],
        "audit.skip": lambda: data["audit"]["skip"][0],
    }[key.table]()
    del container[key.key]
    with pytest.raises(UsageError) as refused:
        parse(data, tmp_path)
    assert repr(key.key) in refused.value.message or f".{key.key}" in refused.value.message


@pytest.mark.parametrize("name", list(NAMED))
def test_each_key_is_read_into_its_field(name: str, tmp_path: Path) -> None:
    """Its example, written in the spec, is what the spec then holds there: the key is read."""
    key = NAMED[name]
    assert key.example is not None and key.example != key.default
    spec = parse(with_value(key, key.example), tmp_path)
    value = value_of(spec, key)
    assert value != key.default and value is not None
    if isinstance(key.example, str) and key.table != "site":  # [site] matrix is made absolute
        assert value in (key.example, (key.example,)) or key.key == "platform"


@pytest.mark.parametrize("name", [n for n in NAMED if n.startswith("stack.")])
def test_a_target_overrides_each_stack_key(name: str, tmp_path: Path) -> None:
    key = NAMED[name]
    data = with_value(key, key.example)
    moved = data["stack"].pop(key.key)
    if key.required:
        data["stack"][key.key] = "560" if key.key == "driver" else "tensorflow"
    data["target"] = [{"name": "one", key.key: moved}]
    overridden = parse(data, tmp_path).targets[0].stack
    del data["target"]
    base = parse(data, tmp_path).targets[0].stack
    assert getattr(overridden, key.field) != getattr(base, key.field)


@pytest.mark.parametrize("name", WITH_CHOICES)
def test_the_choices_are_exactly_what_the_reader_accepts(name: str, tmp_path: Path) -> None:
    key = NAMED[name]
    assert key.choices
    for choice in key.choices:
        assert value_of(parse(with_value(key, choice), tmp_path), key) == choice
    with pytest.raises(UsageError) as refused:
        parse(with_value(key, "not-a-choice"), tmp_path)
    assert f"accepted: {', '.join(key.choices)}" in refused.value.message


@pytest.mark.parametrize("name", WITH_BOUNDS)
def test_the_bounds_are_exactly_what_the_reader_accepts(name: str, tmp_path: Path) -> None:
    key = NAMED[name]
    assert key.bounds
    low, high = key.bounds
    for inside in (low, high):
        assert value_of(parse(with_value(key, inside), tmp_path), key) == inside
    for outside in (low - 1, high + 1):
        with pytest.raises(UsageError) as refused:
            parse(with_value(key, outside), tmp_path)
        assert f"from {low} to {high}" in refused.value.message


# a value of another TOML type than the declared one, for each declared type
WRONG_TYPE = {
    keys.STRING: 5,
    keys.STRINGS: "not-a-list",
    keys.STRING_OR_STRINGS: 5,
    keys.BOOLEAN: "yes",
    keys.INTEGER: "5",
    keys.STRING_TABLE: "not-a-table",
    keys.TABLE_LIST: "not-a-list",
}


@pytest.mark.parametrize("name", list(NAMED))
def test_a_value_of_another_type_is_refused(name: str, tmp_path: Path) -> None:
    key = NAMED[name]
    with pytest.raises(UsageError) as refused:
        parse(with_value(key, WRONG_TYPE[key.type]), tmp_path)
    assert key.key in refused.value.message


def test_the_examples_make_one_spec_the_reader_accepts(tmp_path: Path) -> None:
    """Every non-conda example at once (the reference shows them as a sample spec)."""
    data: dict[str, Any] = {}
    for key in keys.KEYS:
        if (key.table, key.key) in CONDA_ONLY or key.table in ("target", "audit.skip"):
            continue
        data.setdefault(key.table, {})[key.key] = key.example
    data["target"] = [{"name": NAMED["target.name"].example}]
    spec = parse(data, tmp_path)
    assert spec.targets[0].name == "h100" and spec.image.installer == "pip"
