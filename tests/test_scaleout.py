"""The bake file and the GitHub Actions workflow: field by field, against schemas, byte-stable.

The workflow is checked with check-jsonschema's vendored GitHub workflow schema (no network: the test
points every proxy at a closed port). `docker buildx bake --print` is not run here: this machine's
docker CLI has no buildx plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from envbuild.errors import UsageError
from envbuild.render.plan import build_plan
from envbuild.scaleout import github as scaleout
from envbuild.spec.model import load_spec
from tests.conftest import REPO, matrix

TORCH = REPO / "examples" / "torch-wheels" / "envbuild.toml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"

TWO_TARGETS = """\
[stack]
driver = "550"
framework = "torch"
strategy = "wheels"
os = "ubuntu22.04"

[image]
repository = "registry.example.com:5000/team/train"

[[target]]
name = "h100"
gpus = ["H100"]

[[target]]
name = "l4.infer"
gpus = ["L4"]
"""


@pytest.fixture
def two_targets(tmp_path: Path) -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(TWO_TARGETS)
    return path


def _yaml_load(text: str):
    return YAML(typ="safe", pure=True).load(text)


# ---------------------------------------------------------------------------------------------- bake


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


# ------------------------------------------------------------------------------------------ workflow


def _check_workflow(path: Path) -> subprocess.CompletedProcess:
    closed = "http://127.0.0.1:9"  # nothing listens there: a schema download would fail
    env = {**os.environ, "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "http_proxy": closed}
    env.update({"https_proxy": closed, "NO_PROXY": "", "no_proxy": ""})
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("which", ["torch", "two"])
def test_workflow_passes_the_github_workflow_schema(matrix, two_targets, tmp_path, which):
    spec = load_spec(str(TORCH if which == "torch" else two_targets))
    path = tmp_path / ".github" / "workflows" / "envbuild.yml"
    path.parent.mkdir(parents=True)
    path.write_text(scaleout.github_workflow_yaml(matrix, spec, spec_path="examples/envbuild.toml"))
    result = _check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_the_schema_check_rejects_a_broken_workflow(matrix, tmp_path):
    workflow = scaleout.github_workflow(matrix, load_spec(str(TORCH)))
    workflow["jobs"]["build"]["runs-on"] = 3
    del workflow["jobs"]["promote"]["steps"]
    path = tmp_path / "broken.yml"
    path.write_text(scaleout.to_yaml(workflow))
    assert _check_workflow(path).returncode == 1


def test_workflow_yaml_reads_back_as_the_dict(matrix, two_targets):
    spec = load_spec(str(two_targets))
    text = scaleout.github_workflow_yaml(matrix, spec)
    assert _yaml_load(text) == scaleout.github_workflow(matrix, spec)
    assert '\n"on":\n' in text  # not the YAML 1.1 boolean
    assert text == scaleout.github_workflow_yaml(matrix, load_spec(str(two_targets)))


def test_workflow_job_graph_and_matrices(matrix, two_targets):
    spec = load_spec(str(two_targets))
    workflow = scaleout.github_workflow(matrix, spec, spec_path="ci/envbuild.toml")
    assert workflow["on"] == {"push": {"branches": ["main"]}, "workflow_dispatch": {}}
    jobs = workflow["jobs"]
    assert list(jobs) == ["lock-check", "build", "verify", "promote"]
    assert "needs" not in jobs["lock-check"]
    assert jobs["build"]["needs"] == ["lock-check"]
    assert jobs["verify"]["needs"] == ["build"]
    assert jobs["promote"]["needs"] == ["verify"]
    assert jobs["build"]["strategy"]["matrix"] == {"target": ["h100", "l4.infer"]}
    assert jobs["promote"]["strategy"]["matrix"] == {"target": ["h100", "l4.infer"]}
    include = jobs["verify"]["strategy"]["matrix"]["include"]
    assert [entry["target"] for entry in include] == ["h100", "l4.infer"]

    lock_runs = [s["run"] for s in jobs["lock-check"]["steps"] if "run" in s]
    assert "envbuild lock --check -f ci/envbuild.toml" in lock_runs
    assert jobs["lock-check"]["runs-on"] == "ubuntu-latest"
    uses = [s.get("uses") for s in jobs["lock-check"]["steps"]]
    assert uses[:2] == ["actions/checkout@v4", "actions/setup-python@v5"]
    assert jobs["lock-check"]["steps"][1]["with"] == {"python-version": "3.11"}


def test_workflow_build_job(matrix, two_targets):
    spec = load_spec(str(two_targets))
    build = scaleout.github_workflow(matrix, spec, staging="ghcr.io/acme/staging")["jobs"]["build"]
    assert build["runs-on"] == "ubuntu-latest"
    steps = build["steps"]
    uses = [s.get("uses") for s in steps]
    assert "docker/setup-buildx-action@v3" in uses
    login = steps[uses.index("docker/login-action@v3")]
    assert login["with"] == {
        "registry": "ghcr.io",  # the staging repository's registry
        "username": "${{ secrets.REGISTRY_USER }}",
        "password": "${{ secrets.REGISTRY_PASSWORD }}",
    }
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "envbuild render -f envbuild.toml -o build --target ${{ matrix.target }}" in runs
    assert "docker buildx build --push" in runs
    assert "--tag ghcr.io/acme/staging:candidate-${{ matrix.target }}-${{ github.sha }}" in runs
    assert "--metadata-file build/metadata.json" in runs
    assert '["containerimage.digest"]' in runs
    assert next(s for s in steps if s.get("id") == "build")
    uploads = {s["with"]["name"]: s["with"]["path"] for s in steps if s.get("uses") == scaleout.UPLOAD}
    assert uploads["digest-${{ matrix.target }}"] == "digest-${{ matrix.target }}.txt"
    assert "build/${{ matrix.target }}/" in uploads["record-build-${{ matrix.target }}"]


def test_workflow_verify_runs_on_gpu_runners_per_capability(matrix, two_targets):
    spec = load_spec(str(two_targets))
    verify = scaleout.github_workflow(matrix, spec)["jobs"]["verify"]
    assert verify["runs-on"] == "${{ matrix.runner }}"
    runners = {entry["target"]: entry["runner"] for entry in verify["strategy"]["matrix"]["include"]}
    assert runners == {"h100": ["self-hosted", "gpu", "sm_90"], "l4.infer": ["self-hosted", "gpu", "sm_89"]}
    steps = verify["steps"]
    download = next(s for s in steps if s.get("uses") == scaleout.DOWNLOAD)
    assert download["with"] == {"name": "digest-${{ matrix.target }}"}
    smoke = next(s for s in steps if "envbuild verify" in s.get("run", ""))
    assert smoke["env"]["IMAGE"] == "registry.example.com:5000/team/train@${{ steps.digest.outputs.digest }}"
    assert '"$IMAGE" --smoke-device gpu' in smoke["run"]
    assert "--report smoke.json" in smoke["run"]
    upload = next(s for s in steps if s.get("uses") == scaleout.UPLOAD)
    assert upload["with"]["name"] == "record-verify-${{ matrix.target }}-${{ matrix.gpu }}"


def test_workflow_verify_fans_out_over_a_targets_gpus(matrix):
    spec = load_spec(str(TORCH))  # H100 and L4: one runner cannot carry both sm labels
    verify = scaleout.github_workflow(matrix, spec, gpu_labels=["linux", "nvidia"])["jobs"]["verify"]
    include = verify["strategy"]["matrix"]["include"]
    assert [(e["target"], e["runner"]) for e in include] == [
        ("default", ["linux", "nvidia", "sm_90"]),
        ("default", ["linux", "nvidia", "sm_89"]),
    ]


def test_workflow_promote_uses_to_with_the_final_tags(matrix, two_targets):
    spec = load_spec(str(two_targets))
    promote = scaleout.github_workflow(matrix, spec)["jobs"]["promote"]
    assert promote["runs-on"] == "ubuntu-latest"
    steps = [s for s in promote["steps"] if "envbuild promote" in s.get("run", "")]
    assert [s["if"] for s in steps] == ["matrix.target == 'h100'", "matrix.target == 'l4.infer'"]
    for step, target in zip(steps, spec.targets, strict=True):
        tags = build_plan(matrix, spec, target).tags
        assert tags and all(t.startswith("registry.example.com:5000/team/train:") for t in tags)
        assert step["run"] == 'envbuild promote "$IMAGE" ' + " ".join(f"--to {t}" for t in tags) + (
            ' --report "$(ls verify/*/smoke.json | head -n 1)"'
        )
        assert step["env"]["IMAGE"].endswith("@${{ steps.digest.outputs.digest }}")
    assert any(s.get("uses") == scaleout.UPLOAD for s in promote["steps"])


def test_registry_host():
    assert scaleout.registry_host("ghcr.io/acme/train") == "ghcr.io"
    assert scaleout.registry_host("localhost:5000/train") == "localhost:5000"
    assert scaleout.registry_host("acme/train") == "docker.io"
    assert scaleout.registry_host("train") == "docker.io"


# -------------------------------------------------------------------------------------- YAML emitter


@pytest.mark.parametrize(
    "text",
    ["on", "ON", "yes", "No", "true", "null", "~", "3.11", "010", "0x1f", "1e3", ".5", "-", "- a", "a: b",
     "a #b", "#x", "x:", "*ref", "&a", "!tag", "@x", "`x`", "{a}", "[a]", "'q'", '"q"', "", " lead",
     "trail ", "tab\there", "two\nlines", "2024-01-01", "%x", "|", ">", "a,b", "ünï"],
)  # fmt: skip
def test_to_yaml_quotes_what_yaml_would_misread(text):
    document = {text: [text, {text: text}], "k": text}
    assert _yaml_load(scaleout.to_yaml(document)) == document


_TEXT = st.text(alphabet=st.sampled_from(list("aZ09 -_:#'\"{}[],&*!|>%@`.\n\t\\$")), max_size=12)
_VALUES = st.recursive(
    st.one_of(_TEXT, st.integers(-5, 5), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_to_yaml_round_trips(value):
    assert _yaml_load(scaleout.to_yaml(value)) == value
