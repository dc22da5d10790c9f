"""The GitHub Actions workflow `envbuild ci github` writes: byte for byte against golden files
(UPDATE_GOLDEN=1 rewrites them), job by job, the YAML quoting filters every spec- or flag-derived value
goes through, and hostile spec paths: the workflow keeps its shape and bash hands envbuild the path as
one word (issue 14, item 7).

The real schema check (check-jsonschema) is tests/integration/test_workflow_schema.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.scaleout.github import ACTIONS, workflow_yaml
from envbuild.scaleout.quoting import yaml_block, yaml_scalar
from envbuild.spec.model import load_spec
from tests.helpers.cicases import GITHUB_CASES
from tests.helpers.outputs import BAD_OUTPUTS, assert_refused_output, bad_output
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH
from tests.helpers.workflows import INSTALL, yaml_load

CASES = GITHUB_CASES


def workflow_text(matrix: Matrix, spec, **kwargs) -> str:
    """The workflow, installing envbuild from INSTALL unless the test says otherwise."""
    return workflow_yaml(matrix, spec, **{"install": INSTALL, **kwargs})


def parsed_workflow(matrix: Matrix, spec, **kwargs) -> dict:
    return yaml_load(workflow_text(matrix, spec, **kwargs))


@pytest.mark.parametrize("name", CASES)
def test_golden_workflows(matrix: Matrix, name: str) -> None:
    spec_path, kwargs = CASES[name]
    text = workflow_text(matrix, load_spec(str(spec_path)), **kwargs)
    golden = GOLDEN / "ci" / f"{name}.yml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"ci/{name}.yml (UPDATE_GOLDEN=1)"


def test_workflow_is_deterministic_and_quotes_on(matrix: Matrix, two_targets) -> None:
    text = workflow_text(matrix, load_spec(str(two_targets)))
    assert '\n"on":\n' in text  # not the YAML 1.1 boolean
    assert text == workflow_text(matrix, load_spec(str(two_targets)))


def test_workflow_job_graph_and_matrices(matrix, two_targets):
    spec = load_spec(str(two_targets))
    workflow = parsed_workflow(matrix, spec, spec_path="ci/envbuild.toml")
    assert workflow["on"] == {"push": {"branches": ["main"]}, "pull_request": {}, "workflow_dispatch": {}}
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
    build = parsed_workflow(matrix, spec, staging="ghcr.io/acme/staging")["jobs"]["build"]
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
    assert "--tag 'ghcr.io/acme/staging:candidate-${{ matrix.target }}-${{ github.sha }}'" in runs
    assert "--metadata-file build/metadata.json" in runs
    assert '["containerimage.digest"]' in runs
    assert next(s for s in steps if s.get("id") == "build")
    uploads = {s["with"]["name"]: s["with"]["path"] for s in steps if s.get("uses") == ACTIONS["upload"]}
    assert uploads["digest-${{ matrix.target }}"] == "digest-${{ matrix.target }}.txt"
    assert "build/${{ matrix.target }}/" in uploads["record-build-${{ matrix.target }}"]


def test_workflow_verify_runs_on_gpu_runners_per_capability(matrix, two_targets):
    spec = load_spec(str(two_targets))
    verify = parsed_workflow(matrix, spec)["jobs"]["verify"]
    assert verify["runs-on"] == "${{ matrix.runner }}"
    runners = {entry["target"]: entry["runner"] for entry in verify["strategy"]["matrix"]["include"]}
    assert runners == {"h100": ["self-hosted", "gpu", "sm_90"], "l4.infer": ["self-hosted", "gpu", "sm_89"]}
    steps = verify["steps"]
    download = next(s for s in steps if s.get("uses") == ACTIONS["download"])
    assert download["with"] == {"name": "digest-${{ matrix.target }}"}
    smoke = next(s for s in steps if "envbuild verify" in s.get("run", ""))
    assert smoke["env"]["IMAGE"] == "registry.example.com:5000/team/train@${{ steps.digest.outputs.digest }}"
    assert '"$IMAGE" --gpu H100 --smoke-device gpu' in smoke["run"]  # the audit gate, then the smoke step
    assert smoke["if"] == "matrix.target == 'h100' && matrix.gpu == 'sm_90'"
    assert "--report smoke.json" in smoke["run"]
    upload = next(s for s in steps if s.get("uses") == ACTIONS["upload"])
    assert upload["with"]["name"] == "record-verify-${{ matrix.target }}-${{ matrix.gpu }}"


def test_workflow_verify_fans_out_over_a_targets_gpus(matrix):
    spec = load_spec(str(TORCH))  # H100 and L4: one runner cannot carry both sm labels
    verify = parsed_workflow(matrix, spec, gpu_labels=["linux", "nvidia"])["jobs"]["verify"]
    include = verify["strategy"]["matrix"]["include"]
    assert [(e["target"], e["runner"]) for e in include] == [
        ("default", ["linux", "nvidia", "sm_90"]),
        ("default", ["linux", "nvidia", "sm_89"]),
    ]


def test_workflow_promote_uses_to_with_the_final_tags(matrix, two_targets):
    spec = load_spec(str(two_targets))
    promote = parsed_workflow(matrix, spec)["jobs"]["promote"]
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
    assert any(s.get("uses") == ACTIONS["upload"] for s in promote["steps"])


# --- the quoting filters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["on", "ON", "yes", "No", "true", "null", "~", "3.11", "010", "0x1f", "1e3", ".5", "-", "- a", "a: b",
     "a #b", "#x", "x:", "*ref", "&a", "!tag", "@x", "`x`", "{a}", "[a]", "'q'", '"q"', "", " lead",
     "trail ", "tab\there", "two\nlines", "2024-01-01", "%x", "|", ">", "a,b", "ünï"],
)  # fmt: skip
def test_yaml_scalar_quotes_what_yaml_would_misread(text):
    assert yaml_load(f"key: {yaml_scalar(text)}\n") == {"key": text}
    assert yaml_load(f"- {yaml_scalar(text)}\n") == [text]


_TEXT = st.text(alphabet=st.sampled_from(list("aZ09 -_:#'\"{}[],&*!|>%@`.\n\t\\$")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_yaml_scalar_and_block_round_trip(text):
    assert yaml_load(f"key: {yaml_scalar(text)}\n") == {"key": text}
    assert yaml_load(f"job:\n  key: {yaml_block(text, 4)}\nnext: 1\n") == {"job": {"key": text}, "next": 1}


def test_block_is_literal_for_scripts_and_falls_back_to_a_scalar():
    assert yaml_block("a\nb\n", 4) == "|\n    a\n    b"
    assert yaml_block("a \nb\n", 4) == '"a \\nb\\n"'  # a trailing space would not survive a block
    assert yaml_block("one line", 4) == "one line"


# --- hostile paths (issue 14, item 7) ---------------------------------------------------------------

# What a spec path can hold that a shell or a YAML reader would act on. "{marker}" is a file that must
# never come to exist: creating it is what an injected command does.
HOSTILE_PATHS = [
    "x$(touch {marker})/envbuild.toml",
    "x`touch {marker}`/envbuild.toml",
    "x;touch {marker};/envbuild.toml",
    "x|touch {marker}/envbuild.toml",
    'it\'s "quoted"/envbuild.toml',
    "env build/envbuild.toml",
    "a\nfoo: bar #/envbuild.toml",  # a newline after the header comment's text: a YAML key
    "a\ntouch {marker}\n/envbuild.toml",  # a newline in a shell script: a second command
    "a: b/envbuild.toml",
    "a #b/envbuild.toml",
    "#a/envbuild.toml",
    "$HOME/${{USER}}/*.toml",  # the doubled braces are str.format's: one ${USER}
    "~/envbuild.toml",
    "back\\slash\ttab/envbuild.toml",
    "x\u2028y\u0085z/envbuild.toml",  # YAML 1.1 line breaks
    "ünï/envbuild.toml",
]


def key_paths(value: object, prefix: tuple = ()) -> set[tuple]:
    """Every key path in a parsed document (list items by index): the document's shape, not its text."""
    found = {prefix}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= key_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found |= key_paths(item, (*prefix, index))
    return found


def spec_steps(workflow: dict) -> dict[str, str]:
    """The run: scripts that name the spec file: lock-check's and build's."""
    scripts = {}
    for job in ("lock-check", "build"):
        for step in workflow["jobs"][job]["steps"]:
            if " -f " in step.get("run", ""):
                scripts[job] = step["run"]
    return scripts


def bash_argv(script: str, tmp_path, target: str = "h100") -> list[str]:
    """What `envbuild` would be called with if GitHub ran `script` (bash, as a `run:` step does): the
    runner substitutes ${{ matrix.target }} first, then bash runs the text."""
    argv_file = tmp_path / "argv"
    stub = f"envbuild() {{ printf '%s\\0' \"$@\" > {argv_file}; }}\n"
    script = script.replace("${{ matrix.target }}", target)
    done = subprocess.run(["bash", "-e", "-c", stub + script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return argv_file.read_text().split("\0")[:-1]


@pytest.mark.parametrize("hostile", HOSTILE_PATHS)
def test_hostile_spec_path_keeps_the_workflow_shape(matrix, two_targets, tmp_path, hostile):
    path = hostile.format(marker=tmp_path / "pwned")
    spec = load_spec(str(two_targets))
    baseline = parsed_workflow(matrix, spec)
    text = workflow_text(matrix, spec, spec_path=path)
    workflow = yaml_load(text)
    assert key_paths(workflow) == key_paths(baseline)
    header, _ = text.split("\nname: envbuild\n", 1)  # the header comment stays comment lines
    assert all(line.startswith("#") for line in header.splitlines())
    scripts = spec_steps(workflow)
    assert set(scripts) == {"lock-check", "build"}
    for script in scripts.values():
        words = shlex.split(script)
        assert words[words.index("-f") + 1] == path


@pytest.mark.parametrize("hostile", HOSTILE_PATHS)
def test_hostile_spec_path_reaches_envbuild_as_one_word_in_bash(matrix, two_targets, tmp_path, hostile):
    marker = tmp_path / "pwned"
    path = hostile.format(marker=marker)
    workflow = parsed_workflow(matrix, load_spec(str(two_targets)), spec_path=path)
    scripts = spec_steps(workflow)
    assert bash_argv(scripts["lock-check"], tmp_path) == ["lock", "--check", "-f", path]
    assert bash_argv(scripts["build"], tmp_path) == ["render", "-f", path, "-o", "build", "--target", "h100"]
    assert not marker.exists()


_PATH_TEXT = st.text(
    alphabet=st.sampled_from([*"aZ09 -_:#'\"{}[],&*!|>%@`.\n\r\t\\$;()~/", "\u2028", "\u0085", "é"]),
    min_size=1,
    max_size=30,
)


def test_any_spec_path_keeps_the_shape_or_is_refused(matrix):
    spec = load_spec(str(TORCH))
    shape = key_paths(parsed_workflow(matrix, spec))  # once: parsing the workflow is what takes time

    @settings(max_examples=60, deadline=None)
    @given(_PATH_TEXT)
    def check(path: str) -> None:
        if "${{" in path:
            with pytest.raises(UsageError):
                workflow_text(matrix, spec, spec_path=path)
            return
        workflow = yaml_load(workflow_text(matrix, spec, spec_path=path))
        assert key_paths(workflow) == shape
        for script in spec_steps(workflow).values():
            words = shlex.split(script)
            assert words[words.index("-f") + 1] == ("./" + path if path.startswith("-") else path)

    check()


def test_spec_path_starting_with_a_dash_is_not_read_as_an_option(matrix, two_targets, tmp_path):
    workflow = parsed_workflow(matrix, load_spec(str(two_targets)), spec_path="-h/envbuild.toml")
    argv = bash_argv(spec_steps(workflow)["lock-check"], tmp_path)
    assert argv == ["lock", "--check", "-f", "./-h/envbuild.toml"]


@pytest.mark.parametrize("path", ["${{ github.event.head_commit.message }}/envbuild.toml", "a${{x}}.toml"])
def test_spec_path_with_a_github_expression_is_refused(matrix, two_targets, path):
    # the runner substitutes ${{ }} into a run: script before the shell reads it, past any quoting
    with pytest.raises(UsageError) as caught:
        workflow_text(matrix, load_spec(str(two_targets)), spec_path=path)
    assert path in caught.value.message
    assert caught.value.exit_code == 2
    assert caught.value.fix


# --- where the workflow is written (issue 14, item 8) ------------------------------------------------


@pytest.mark.parametrize("kind", BAD_OUTPUTS)
def test_ci_github_output_that_is_no_writable_file_is_a_usage_error(
    capsys, two_targets, tmp_path, monkeypatch, kind
):
    monkeypatch.chdir(tmp_path)  # the repository: the spec is in it, wherever -o points
    output = bad_output(tmp_path, kind)
    code = main(["ci", "github", "-f", str(two_targets), "-o", output, "--install", INSTALL])
    assert_refused_output(code, *capsys.readouterr(), output)


def test_ci_github_into_a_directory_suggests_a_file_in_it(capsys, two_targets, tmp_path):
    assert main(["ci", "github", "-f", str(two_targets), "-o", str(tmp_path), "--install", INSTALL]) == 2
    assert str(tmp_path / "envbuild.yml") in capsys.readouterr().err
    assert tmp_path.is_dir()


def test_ci_github_creates_github_workflows_for_its_default_output(
    capsys, two_targets, tmp_path, monkeypatch
):
    # a repository without workflows has no .github/workflows yet, and GitHub reads them only there
    monkeypatch.chdir(tmp_path)
    assert main(["ci", "github", "-f", two_targets.name, "--install", INSTALL]) == 0, capsys.readouterr().err
    written = tmp_path / ".github" / "workflows" / "envbuild.yml"
    assert yaml_load(written.read_text())["name"] == "envbuild"


def test_ci_github_makes_no_other_missing_directory(capsys, two_targets, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            ["ci", "github", "-f", two_targets.name, "-o", "ci/workflows/envbuild.yml", "--install", INSTALL]
        )
        == 2
    )
    assert "ci/workflows" in capsys.readouterr().err
    assert not (tmp_path / "ci").exists()


# --- supply chain attestations (issue 20, item 6) ----------------------------------------------------


def test_build_asks_buildkit_for_its_sbom_and_max_provenance(matrix, two_targets):
    build = parsed_workflow(matrix, load_spec(str(two_targets)))["jobs"]["build"]
    script = next(s["run"] for s in build["steps"] if s.get("id") == "build")
    words = shlex.split(script.split("\n--metadata-file", 1)[0].replace("\\\n", " ").split("\n", 1)[0])
    assert words[:4] == ["docker", "buildx", "build", "--push"]
    assert "--sbom=true" in words and "--provenance=mode=max" in words
    # setup-buildx-action's docker-container builder: the default docker driver refuses attestations
    uses = [s.get("uses") for s in build["steps"]]
    assert uses.index(ACTIONS["setup_buildx"]) < [s.get("id") for s in build["steps"]].index("build")


def attach_steps(job: dict) -> list[dict]:
    return [s for s in job["steps"] if "envbuild attest" in s.get("run", "")]


def test_attach_runs_after_verify_and_promote_never_before(matrix, two_targets):
    workflow = parsed_workflow(matrix, load_spec(str(two_targets)))
    jobs = workflow["jobs"]
    for name in ("lock-check", "build", "verify"):
        assert not attach_steps(jobs[name]), name
    promote = jobs["promote"]
    assert promote["needs"] == ["verify"]
    steps = promote["steps"]
    names = [s.get("name") for s in steps]
    promotes = [i for i, s in enumerate(steps) if "envbuild promote" in s.get("run", "")]
    attaches = [steps.index(s) for s in attach_steps(promote)]
    assert len(attaches) == 2 and min(attaches) > max(promotes), names
    reports = [i for i, s in enumerate(steps) if s.get("with", {}).get("path") == "verify"]
    assert reports and reports[0] < min(attaches)  # the smoke reports come back before they are read
    # the job that attaches may push to the registry's packages
    assert promote["permissions"] == {"contents": "read", "packages": "write"}
    assert workflow["permissions"] == {"contents": "read"}  # every other job: read only


def test_attach_command_line_names_the_promoted_digest_and_its_smoke_report(matrix, two_targets):
    spec = load_spec(str(two_targets))
    promote = parsed_workflow(matrix, spec)["jobs"]["promote"]
    steps = attach_steps(promote)
    assert [s["if"] for s in steps] == ["matrix.target == 'h100'", "matrix.target == 'l4.infer'"]
    for step in steps:
        assert step["env"] == {"DIGEST": "${{ steps.digest.outputs.digest }}"}
        lines = [line for line in step["run"].splitlines() if line.startswith("envbuild attest")]
        assert [shlex.split(line.replace('"$DIGEST"', "DIGEST")) for line in lines] == [
            ["envbuild", "attest", "registry.example.com:5000/team/train@DIGEST", "--attach", "--report",
             "$(ls verify/*/smoke.json | head -n 1)"],
        ]  # fmt: skip
        assert "--sign-key" not in step["run"]


def test_attach_goes_to_the_promoted_repository_not_staging(matrix, two_targets):
    spec = load_spec(str(two_targets))
    promote = parsed_workflow(matrix, spec, staging="docker.io/acme/staging")["jobs"]["promote"]
    assert attach_steps(promote)
    for step in attach_steps(promote):
        assert "envbuild attest registry.example.com:5000/team/train@" in step["run"]
        assert "staging" not in step["run"]


def test_attach_of_a_multi_platform_target_names_each_platform_digest(matrix):
    workflow = parsed_workflow(matrix, load_spec(str(GOLDEN / "ci" / "platforms.toml")))
    promote = workflow["jobs"]["promote"]
    steps = attach_steps(promote)
    assert [s["if"] for s in steps] == ["matrix.target == 'both'", "matrix.target == 'x86'"]
    both, x86 = steps[0]["run"], steps[1]["run"]
    assert (
        'envbuild attest ghcr.io/acme/train@"$digest" --attach '
        '--report "$(ls verify/record-verify-"$1"-*/smoke.json | head -n 1)"'
    ) in both
    assert "grep -Eq '^sha256:[0-9a-f]{64}$'" in both
    calls = [line for line in both.splitlines() if line.startswith("attach ")]
    assert calls == ["attach both-amd64", "attach both-arm64"]
    assert [line for line in x86.splitlines() if line.startswith("attach ")] == ["attach x86"]
    # the build records are not needed: the image is read from the registry, the report from verify
    assert not [s for s in promote["steps"] if s.get("with", {}).get("path") == "build"]
