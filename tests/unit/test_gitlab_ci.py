"""The .gitlab-ci.yml `envbuild ci gitlab` writes (issue 17, item 4): the same pipeline as the GitHub
workflow (lock-check, build on a Docker runner, GPU verify on tagged runners, promote by digest),
byte for byte against golden files (UPDATE_GOLDEN=1 rewrites them), job by job, with the same quoting
guarantees and the same options. The schema check is tests/integration/test_workflow_schema.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from envbuild.scaleout.gitlab import pipeline_yaml
from envbuild.spec.model import load_spec
from tests.helpers.cicases import GITLAB_CASES, SEALED
from tests.helpers.outputs import BAD_OUTPUTS, assert_refused_output, bad_output
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH
from tests.helpers.workflows import INSTALL, yaml_load

CASES = GITLAB_CASES
STAGES = ["lock-check", "build", "verify", "promote"]


def pipeline_text(matrix: Matrix, spec, **kwargs) -> str:
    return pipeline_yaml(matrix, spec, **{"install": INSTALL, **kwargs})


def pipeline(matrix: Matrix, spec, **kwargs) -> dict:
    return yaml_load(pipeline_text(matrix, spec, **kwargs))


@pytest.mark.parametrize("name", CASES)
def test_golden_pipelines(matrix: Matrix, name: str) -> None:
    spec_path, kwargs = CASES[name]
    text = pipeline_text(matrix, load_spec(str(spec_path)), **kwargs)
    golden = GOLDEN / "ci" / f"{name}.yml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"ci/{name}.yml (UPDATE_GOLDEN=1)"


def test_the_four_stages_and_their_jobs(matrix, two_targets):
    doc = pipeline(matrix, load_spec(str(two_targets)))
    assert doc["stages"] == STAGES
    jobs = {name: job for name, job in doc.items() if isinstance(job, dict) and "stage" in job}
    assert {name: job["stage"] for name, job in jobs.items()} == {
        "lock-check": "lock-check",
        "render": "build",
        "build:h100": "build",
        "build:l4.infer": "build",
        "verify:h100:sm_90": "verify",
        "verify:l4.infer:sm_89": "verify",
        "promote:h100": "promote",
        "promote:l4.infer": "promote",
    }
    assert jobs["render"]["needs"] == ["lock-check"]
    assert jobs["build:h100"]["needs"] == ["render"]
    assert jobs["verify:h100:sm_90"]["needs"] == ["build:h100"]
    assert jobs["promote:h100"]["needs"] == ["build:h100", "verify:h100:sm_90"]


def test_build_runs_on_a_docker_runner_and_hands_on_the_digest(matrix, two_targets):
    build = pipeline(matrix, load_spec(str(two_targets)))["build:h100"]
    assert build["image"].startswith("docker:") and build["services"][0].endswith("-dind")
    assert build["variables"]["TARGET"] == "h100"
    assert (
        build["variables"]["CANDIDATE"]
        == "registry.example.com:5000/team/train:candidate-h100-$CI_COMMIT_SHA"
    )
    script = "\n".join(build["script"])
    assert "docker buildx build --push" in script and '"build/$TARGET"' in script
    assert "--password-stdin registry.example.com:5000" in script
    assert build["artifacts"] == {"reports": {"dotenv": "build.env"}}


def test_verify_runs_on_gpu_runners_tagged_by_capability(matrix):
    doc = pipeline(matrix, load_spec(str(TORCH)), gpu_tags=["nvidia"])
    verify = {name: job for name, job in doc.items() if name.startswith("verify:")}
    assert {name: job["tags"] for name, job in verify.items()} == {
        "verify:default:sm_90": ["nvidia", "sm_90"],
        "verify:default:sm_89": ["nvidia", "sm_89"],
    }
    script = "\n".join(verify["verify:default:sm_90"]["script"])
    assert 'envbuild verify "$IMAGE" --gpu H100 --smoke-device gpu' in script  # the audit, then the smoke
    assert "--report verify/sm_90/smoke.json" in script


def test_promote_copies_the_final_tags_by_digest(matrix, two_targets):
    doc = pipeline(matrix, load_spec(str(two_targets)))
    script = doc["promote:h100"]["script"]
    assert any(line.startswith("IMAGE=registry.example.com:5000/team/train") for line in script)
    promote = next(line for line in script if line.startswith("envbuild promote"))
    assert "--to registry.example.com:5000/team/train:" in promote and "--report" in promote


def test_merge_requests_run_lock_check_only(matrix, two_targets):
    doc = pipeline(matrix, load_spec(str(two_targets)))
    assert "rules" not in doc["lock-check"] and "extends" not in doc["lock-check"]
    never = {"if": '$CI_PIPELINE_SOURCE == "merge_request_event"', "when": "never"}
    assert doc[".envbuild-publish"]["rules"][0] == never
    for name, job in doc.items():
        if isinstance(job, dict) and job.get("stage") in ("build", "verify", "promote"):
            assert job["extends"] == ".envbuild-publish", name


def test_options_reach_the_commands(matrix, two_targets):
    base = "registry.local:5000/mirror/cuda:12.4"
    doc = pipeline(matrix, load_spec(str(two_targets)), base_image=base, matrix_path="ci/matrix dir")
    for job, command in (("lock-check", "envbuild lock --check"), ("render", "envbuild render")):
        line = next(line for line in doc[job]["script"] if line.startswith(command))
        words = shlex.split(line)
        assert words[words.index("--base-image") + 1] == base
        assert words[words.index("--matrix") + 1] == "ci/matrix dir"
    assert f"python -m pip install {shlex.quote(INSTALL)}" in doc["lock-check"]["script"]


@pytest.mark.parametrize(("source", "code"), [("push", 1), ("web", 1), ("merge_request_event", 0)])
def test_a_sealed_lock_without_its_key_fails_except_in_a_merge_request(matrix, source, code):
    script = pipeline(matrix, load_spec(str(SEALED)))["lock-check"]["script"]
    guard = next(line for line in script if "ENVBUILD_LOCK_KEY" in line)
    env = {"PATH": "/usr/bin:/bin", "CI_PIPELINE_SOURCE": source, "ENVBUILD_LOCK_KEY": ""}
    done = subprocess.run(["sh", "-e", "-c", guard], env=env, capture_output=True, text=True)
    assert done.returncode == code and "ENVBUILD_LOCK_KEY" in done.stdout


HOSTILE = [
    "x$(touch {marker})/envbuild.toml",
    "x`touch {marker}`/envbuild.toml",
    "x;touch {marker};/envbuild.toml",
    'it\'s "quoted" #x: y/envbuild.toml',
    "a\ntouch {marker}\n/envbuild.toml",
    "$CI_JOB_TOKEN/envbuild.toml",
    "-h/envbuild.toml",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_spec_path_reaches_envbuild_as_one_word(matrix, two_targets, tmp_path, hostile):
    marker = tmp_path / "pwned"
    path = hostile.format(marker=marker)
    doc = pipeline(matrix, load_spec(str(two_targets)), spec_path=path)
    header = pipeline_text(matrix, load_spec(str(two_targets)), spec_path=path).split("\nstages:\n")[0]
    assert all(line.startswith("#") for line in header.splitlines())
    argv_file = tmp_path / "argv"
    stub = f"envbuild() {{ printf '%s\\0' \"$@\" > {argv_file}; }}\n"
    line = next(line for line in doc["lock-check"]["script"] if "lock --check" in line)
    subprocess.run(["sh", "-e", "-c", stub + line], check=True, cwd=tmp_path)
    expected = "./" + path if path.startswith("-") else path
    assert argv_file.read_text().split("\0")[:-1] == ["lock", "--check", "-f", expected]
    assert not marker.exists()


# --- the command line ----------------------------------------------------------------------------------


def test_ci_gitlab_writes_gitlab_ci_yml_with_a_repository_relative_spec(
    capsys, two_targets, tmp_path, monkeypatch
):
    (tmp_path / ".git").mkdir()
    (tmp_path / "ml").mkdir()
    spec = two_targets.rename(tmp_path / "ml" / "envbuild.toml")
    monkeypatch.chdir(tmp_path / "ml")
    assert main(["ci", "gitlab", "-f", str(spec), "-o", "../.gitlab-ci.yml", "--install", INSTALL]) == 0
    assert "wrote ../.gitlab-ci.yml" in capsys.readouterr().out
    text = (tmp_path / ".gitlab-ci.yml").read_text()
    assert str(tmp_path) not in text and "envbuild lock --check -f ml/envbuild.toml" in text


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--gpu-tag", "$RUNNER"),
        ("--gpu-tag", ""),
        ("--install", "x; rm -rf /"),
        ("--base-image", "bad ref!!"),
    ],
)
def test_ci_gitlab_bad_option_is_a_usage_error(capsys, two_targets, tmp_path, monkeypatch, flag, value):
    monkeypatch.chdir(tmp_path)
    args = ["ci", "gitlab", "-f", two_targets.name, "--install", INSTALL, flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert flag in err and "fix:" in err and "Traceback" not in err
    assert not (tmp_path / ".gitlab-ci.yml").exists()


def test_ci_gitlab_without_install_in_a_source_checkout_is_a_usage_error(
    capsys, two_targets, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["ci", "gitlab", "-f", two_targets.name]) == 2
    assert "--install" in capsys.readouterr().err


@pytest.mark.parametrize("kind", BAD_OUTPUTS)
def test_ci_gitlab_output_that_is_no_writable_file_is_a_usage_error(
    capsys, two_targets, tmp_path, monkeypatch, kind
):
    monkeypatch.chdir(tmp_path)
    output = bad_output(tmp_path, kind)
    code = main(["ci", "gitlab", "-f", str(two_targets), "-o", output, "--install", INSTALL])
    assert_refused_output(code, *capsys.readouterr(), output)


def test_ci_gitlab_spec_outside_the_repository_is_a_usage_error(capsys, two_targets, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    (repo / ".git").mkdir()
    code = main(
        ["ci", "gitlab", "-f", str(two_targets), "-o", str(repo / ".gitlab-ci.yml"), "--install", INSTALL]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert str(two_targets) in err and "-f" in err


# --- supply chain attestations (issue 20, item 6) ----------------------------------------------------


def test_build_asks_buildkit_for_its_sbom_and_max_provenance(matrix, two_targets):
    script = "\n".join(pipeline(matrix, load_spec(str(two_targets)))["build:h100"]["script"])
    assert "docker buildx create --use --driver docker-container" in script  # the docker driver refuses them
    assert "docker buildx build --push --sbom=true --provenance=mode=max" in script


def test_promote_attaches_envbuilds_documents_after_promoting(matrix, two_targets):
    doc = pipeline(matrix, load_spec(str(two_targets)))
    for name in ("lock-check", "render", "build:h100", "verify:h100:sm_90"):
        assert not any("envbuild attest" in line for line in doc[name]["script"]), name
    for target in ("h100", "l4.infer"):
        promote = doc[f"promote:{target}"]
        script = promote["script"]
        promoted = next(i for i, line in enumerate(script) if line.startswith("envbuild promote"))
        (attach,) = [i for i, line in enumerate(script) if "envbuild attest" in line]
        assert attach > promoted
        assert shlex.split(script[attach].replace('"$DIGEST"', "DIGEST")) == [
            "envbuild", "attest", "registry.example.com:5000/team/train@DIGEST", "--attach", "--report",
            "$(ls verify/*/smoke.json | head -n 1)",
        ]  # fmt: skip
        assert "render" not in promote["needs"]  # the image is read from the registry, by digest
