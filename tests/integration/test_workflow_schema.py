"""The generated CI files against check-jsonschema's vendored GitHub workflow and GitLab CI schemas (no
network: the check points every proxy at a closed port)."""

from __future__ import annotations

import pytest

from envbuild.scaleout.github import workflow_yaml
from envbuild.scaleout.gitlab import pipeline_yaml
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH
from tests.helpers.workflows import INSTALL, check_gitlab_ci, check_workflow, yaml_dump, yaml_load


@pytest.mark.parametrize("which", ["torch", "two"])
def test_workflow_passes_the_github_workflow_schema(matrix, two_targets, tmp_path, which):
    spec = load_spec(str(TORCH if which == "torch" else two_targets))
    path = tmp_path / ".github" / "workflows" / "envbuild.yml"
    path.parent.mkdir(parents=True)
    path.write_text(workflow_yaml(matrix, spec, spec_path="examples/envbuild.toml", install=INSTALL))
    result = check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_sealed_pinned_workflow_passes_the_github_workflow_schema(matrix, tmp_path):
    # the lock-key guard, the pinned `uses: owner/repo@<sha> # v4` and the extra arguments
    spec = load_spec(str(GOLDEN / "ci" / "sealed" / "envbuild.toml"))
    path = tmp_path / "envbuild.yml"
    text = workflow_yaml(
        matrix,
        spec,
        install=INSTALL,
        action_pins=str(GOLDEN / "ci" / "action-pins.txt"),
        base_image="registry.local:5000/mirror/cuda:12.4",
        matrix_path="ci/matrix",
    )
    path.write_text(text)
    result = check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "spec_path",
    ["x$(touch /tmp/p)/envbuild.toml", "a\nfoo: bar #/envbuild.toml", 'it\'s "q" #x: y/envbuild.toml'],
)
def test_workflow_for_a_hostile_spec_path_passes_the_schema(matrix, two_targets, tmp_path, spec_path):
    path = tmp_path / "envbuild.yml"
    path.write_text(workflow_yaml(matrix, load_spec(str(two_targets)), spec_path=spec_path, install=INSTALL))
    result = check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(matrix, tmp_path):
    workflow = yaml_load(workflow_yaml(matrix, load_spec(str(TORCH)), install=INSTALL))
    workflow["jobs"]["build"]["runs-on"] = 3
    del workflow["jobs"]["promote"]["steps"]
    path = tmp_path / "broken.yml"
    yaml_dump(workflow, path)
    assert check_workflow(path).returncode == 1


# --- the GitLab pipeline (issue 17, item 4) ----------------------------------------------------------------

GITLAB_GOLDEN = ["gitlab-torch", "gitlab-two", "gitlab-cpu", "gitlab-sealed"]


@pytest.mark.parametrize("name", GITLAB_GOLDEN)
def test_gitlab_pipeline_passes_the_gitlab_ci_schema(name):
    # the golden files are what pipeline_yaml writes (tests/unit/test_gitlab_ci.py holds them to it)
    result = check_gitlab_ci(GOLDEN / "ci" / f"{name}.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_gitlab_pipeline_for_a_hostile_spec_path_passes_the_schema(matrix, two_targets, tmp_path):
    spec = load_spec(str(two_targets))
    path = tmp_path / ".gitlab-ci.yml"
    path.write_text(pipeline_yaml(matrix, spec, spec_path='it\'s "q" #x: y\n/envbuild.toml', install=INSTALL))
    result = check_gitlab_ci(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_gitlab_schema_check_rejects_a_broken_pipeline(matrix, tmp_path):
    pipeline = yaml_load(pipeline_yaml(matrix, load_spec(str(TORCH)), install=INSTALL))
    pipeline["lock-check"]["when"] = "sometimes"
    pipeline["render"]["artifacts"]["paths"] = "build/"
    path = tmp_path / ".gitlab-ci.yml"
    yaml_dump(pipeline, path)
    assert check_gitlab_ci(path).returncode == 1


@pytest.mark.parametrize("qemu", [False, True])
def test_a_two_platform_workflow_passes_the_github_workflow_schema(matrix, tmp_path, qemu):
    """Issue 19: per-platform builds (native arm64 runners, or QEMU), verify and the index promote."""
    spec = load_spec(str(GOLDEN / "ci" / "platforms.toml"))
    path = tmp_path / "envbuild.yml"
    path.write_text(workflow_yaml(matrix, spec, install=INSTALL, qemu=qemu))
    result = check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


@pytest.mark.parametrize("spec_name", ["two.toml", "platforms.toml"])
def test_a_workflow_that_signs_its_attestations_passes_the_schema(matrix, tmp_path, spec_name):
    """Issue 20: the attach step after promote, with the signing key's secret in its env."""
    path = tmp_path / "envbuild.yml"
    spec = load_spec(str(GOLDEN / "ci" / spec_name))
    path.write_text(workflow_yaml(matrix, spec, install=INSTALL, sign_key_secret="ENVBUILD_SIGN_KEY"))
    assert "--sign-key" in path.read_text()
    result = check_workflow(path)
    assert result.returncode == 0, result.stdout + result.stderr
