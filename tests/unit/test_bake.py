"""The `docker buildx bake` file: field by field, against the Bake reference's schema, byte-stable.

`docker buildx bake --print` is not run here: this machine's docker CLI has no buildx plugin.
"""

from __future__ import annotations

import json
import shlex

import jsonschema
import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.plan.plan import build_plan
from envbuild.scaleout import bake as scaleout
from envbuild.spec.model import load_spec
from tests.helpers.outputs import BAD_OUTPUTS, assert_refused_output, bad_output
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH
from tests.helpers.specs import TWO_TARGETS


def test_bake_file_single_target_fields(matrix):
    spec = load_spec(str(TORCH))
    bake = scaleout.bake_file(matrix, spec)
    assert bake["group"] == {"default": {"targets": ["default"]}}
    assert list(bake["target"]) == ["default"]
    target = bake["target"]["default"]
    assert target["context"] == "build/default"
    assert target["dockerfile"] == "Dockerfile"
    assert target["tags"] == ["ghcr.io/acme/train-torch:candidate-default"]
    assert target["platforms"] == ["linux/amd64"]
    assert target["cache-from"] == ["type=registry,ref=ghcr.io/acme/train-torch:buildcache-default"]
    assert target["cache-to"] == ["type=registry,ref=ghcr.io/acme/train-torch:buildcache-default,mode=max"]
    plan = build_plan(matrix, spec, spec.targets[0])
    assert target["labels"] == dict(plan.labels)
    assert target["labels"]["io.envbuild.framework"] == "torch"
    assert target["labels"]["io.envbuild.target"] == "default"
    assert target["labels"]["org.opencontainers.image.source"] == "https://github.com/acme/train"
    jsonschema.Draft202012Validator(scaleout.BAKE_SCHEMA).validate(bake)


def test_bake_file_two_targets(matrix, two_targets):
    spec = load_spec(str(two_targets))
    bake = scaleout.bake_file(matrix, spec, out_dir="out/ctx", cache_ref="cache.example.com/team/cache:all")
    # "l4.infer" is a spec name; bake allows only [a-zA-Z0-9_-]
    assert bake["group"]["default"]["targets"] == ["h100", "l4-infer"]
    assert sorted(bake["target"]) == ["h100", "l4-infer"]
    h100, l4 = bake["target"]["h100"], bake["target"]["l4-infer"]
    assert h100["context"] == "out/ctx/h100"
    assert l4["context"] == "out/ctx/l4.infer"  # where `envbuild render` writes it
    assert h100["tags"] == ["registry.example.com:5000/team/train:candidate-h100"]
    assert l4["tags"] == ["registry.example.com:5000/team/train:candidate-l4.infer"]
    for target, name in ((h100, "h100"), (l4, "l4.infer")):
        assert target["labels"]["io.envbuild.framework"] == "torch"
        assert target["labels"]["io.envbuild.target"] == name
        assert target["cache-from"] == ["type=registry,ref=cache.example.com/team/cache:all"]
        assert target["cache-to"] == ["type=registry,ref=cache.example.com/team/cache:all,mode=max"]
    jsonschema.Draft202012Validator(scaleout.BAKE_SCHEMA).validate(bake)


def test_every_bake_target_asks_buildkit_for_its_sbom_and_max_provenance(matrix, two_targets, tmp_path):
    """Issue 20, item 6: BuildKit's own attestations beside envbuild's, on every target and platform."""
    spec = load_spec(str(two_targets))
    bake = scaleout.bake_file(matrix, spec)
    assert bake["target"]
    for target in bake["target"].values():
        assert target["attest"] == ["type=sbom", "type=provenance,mode=max"]
    jsonschema.Draft202012Validator(scaleout.BAKE_SCHEMA).validate(bake)
    platforms = tmp_path / "envbuild.toml"
    platforms.write_text((GOLDEN / "ci" / "platforms.toml").read_text())
    per_platform = scaleout.bake_file(matrix, load_spec(str(platforms)))
    assert len(per_platform["target"]) > len(load_spec(str(platforms)).targets)  # <target>-<arch>
    for target in per_platform["target"].values():
        assert target["attest"] == ["type=sbom", "type=provenance,mode=max"]
    # the written file carries them too
    assert json.loads(scaleout.bake_json(matrix, spec))["target"]["h100"]["attest"] == [
        "type=sbom",
        "type=provenance,mode=max",
    ]


def test_bake_json_is_deterministic(matrix, two_targets):
    spec = load_spec(str(two_targets))
    first = scaleout.bake_json(matrix, spec)
    assert first == scaleout.bake_json(matrix, load_spec(str(two_targets)))
    assert first.endswith("}\n")
    document = json.loads(first)
    assert document == scaleout.bake_file(matrix, spec)
    assert first == json.dumps(document, indent=2, sort_keys=True) + "\n"


def test_bake_names_that_collide_are_refused(matrix, tmp_path):
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS.replace('"h100"', '"l4-infer"'))
    with pytest.raises(UsageError, match="bake targets"):
        scaleout.bake_file(matrix, load_spec(str(path)))


def test_bake_schema_is_valid_and_strict():
    validator = jsonschema.Draft202012Validator
    validator.check_schema(scaleout.BAKE_SCHEMA)
    documented = {
        "args", "annotations", "attest", "cache-from", "cache-to", "call", "context", "contexts",
        "description", "dockerfile-inline", "dockerfile", "entitlements", "extra-hosts", "inherits",
        "labels", "matrix", "name", "network", "no-cache-filter", "no-cache", "output", "platforms",
        "pull", "secret", "shm-size", "ssh", "tags", "target", "ulimits",
    }  # fmt: skip
    assert set(scaleout.BAKE_SCHEMA["$defs"]["target"]["properties"]) == documented
    schema = validator(scaleout.BAKE_SCHEMA)
    good = {"target": {"a": {"context": ".", "args": {"X": "1", "Y": None}, "no-cache": True}}}
    assert schema.is_valid(good)
    assert not schema.is_valid({"target": {"a": {"contxt": "."}}})  # misspelt attribute
    assert not schema.is_valid({"target": {"a.b": {}}})  # bake's name rule
    assert not schema.is_valid({"target": {"a": {"labels": {"k": 1}}}})
    assert not schema.is_valid({"group": {"default": {"targets": "a"}}})
    assert not schema.is_valid({"targets": {}})


# --- paths: where the file goes, and the paths it holds (issue 14, items 7 and 8) ------------------


@pytest.fixture
def rendered(capsys, two_targets, tmp_path) -> list[str]:
    """`bake -f SPEC --contexts DIR` for two_targets, its contexts rendered as `envbuild render` does."""
    contexts = tmp_path / "contexts"
    assert main(["render", "-f", str(two_targets), "-o", str(contexts)]) == 0
    capsys.readouterr()
    return ["bake", "-f", str(two_targets), "--contexts", str(contexts)]


@pytest.mark.parametrize("kind", BAD_OUTPUTS)
def test_bake_output_that_is_no_writable_file_is_a_usage_error(capsys, rendered, tmp_path, kind):
    output = bad_output(tmp_path, kind)
    code = main([*rendered, "-o", output])
    assert_refused_output(code, *capsys.readouterr(), output)


def test_bake_into_a_directory_suggests_a_file_in_it(capsys, rendered, tmp_path):
    assert main([*rendered, "-o", str(tmp_path)]) == 2
    assert str(tmp_path / "docker-bake.json") in capsys.readouterr().err


def test_bake_without_rendered_contexts_is_refused_and_writes_nothing(capsys, two_targets, tmp_path):
    """Issue 17, item 5: a bake file whose contexts do not exist fails only later, inside buildx."""
    output, contexts = tmp_path / "docker-bake.json", tmp_path / "build"
    code = main(["bake", "-f", str(two_targets), "-o", str(output), "--contexts", str(contexts)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"--contexts {contexts}: no rendered context (Dockerfile) in {contexts / 'h100'}" in err
    assert str(contexts / "l4.infer") in err
    assert f"fix: run `envbuild render -f {two_targets} -o {contexts}` first" in err
    assert not output.exists()
    assert main(["render", "-f", str(two_targets), "-o", str(contexts), "--target", "h100"]) == 0
    capsys.readouterr()
    assert main(["bake", "-f", str(two_targets), "-o", str(output), "--contexts", str(contexts)]) == 2
    err = capsys.readouterr().err
    assert str(contexts / "l4.infer") in err and str(contexts / "h100") not in err
    assert not output.exists()


def test_bake_prints_a_command_that_names_its_output_as_one_word(capsys, rendered, tmp_path):
    output = tmp_path / "it's $(a) bake.json"
    assert main([*rendered, "-o", str(output)]) == 0
    line = capsys.readouterr().out.strip()
    assert output.is_file()
    command = shlex.split(line.split("; run: ", 1)[1])
    assert command == ["docker", "buildx", "bake", "-f", str(output), "--push"]


def test_bake_json_holds_hostile_context_paths_exactly(matrix, two_targets):
    contexts = 'x$(touch /tmp/p) `b` "q"\n#: y'
    document = json.loads(scaleout.bake_json(matrix, load_spec(str(two_targets)), out_dir=contexts))
    assert document["target"]["l4-infer"]["context"] == f"{contexts}/l4.infer"
    assert set(document) == {"group", "target"}
