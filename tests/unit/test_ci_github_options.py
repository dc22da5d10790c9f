"""`envbuild ci github` as a team runs it (issue 17, item 3): the workflow checks the lock on pull
requests, installs an envbuild that exists, names the secrets it reads, can pin its actions by commit
SHA, and reproduces what the generator was told (--base-image, --matrix, a sealed lock, the spec's
place in the repository) in the commands it runs.

Every test drives the command line (`main`) the way the issue's newcomer did.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from tests.helpers.workflows import INSTALL, yaml_load

PIN = "11bd71901bbe5b1630ceea73d27597364c9af683"
ACTIONS_USED = (
    "actions/checkout@v4",
    "actions/setup-python@v5",
    "docker/setup-buildx-action@v3",
    "docker/login-action@v3",
    "actions/upload-artifact@v4",
    "actions/download-artifact@v4",
)


@pytest.fixture
def repo(tmp_path: Path, two_targets: Path) -> Path:
    """A checkout: a .git directory, the spec at ml/envbuild.toml, no workflows yet."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "ml").mkdir()
    two_targets.rename(tmp_path / "ml" / "envbuild.toml")
    return tmp_path


def generate(repo: Path, *extra: str, capsys=None) -> dict:
    """`envbuild ci github` with an absolute -f and -o inside `repo`; the parsed workflow."""
    output = repo / ".github" / "workflows" / "envbuild.yml"
    args = ["ci", "github", "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(output), *extra]
    code = main(args)
    err = capsys.readouterr().err if capsys else ""
    assert code == 0, err
    return yaml_load(output.read_text())


def refused(capsys, *args: str) -> str:
    """The stderr of a `ci github` run that must be a usage error."""
    code = main(["ci", "github", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "this is a bug" not in err
    return err


def runs(workflow: dict, job: str) -> list[dict]:
    return [s for s in workflow["jobs"][job]["steps"] if "run" in s]


def step_with(workflow: dict, job: str, text: str) -> dict:
    return next(s for s in runs(workflow, job) if text in s["run"])


# --- lock --check on pull requests --------------------------------------------------------------------


def test_lock_check_runs_on_pull_requests_and_nothing_is_pushed_from_one(repo, capsys):
    workflow = generate(repo, "--install", INSTALL, capsys=capsys)
    assert "pull_request" in workflow["on"]
    assert "if" not in workflow["jobs"]["lock-check"]
    for job in ("build", "verify", "promote"):  # a pull request pushes no candidate and copies no tag
        assert workflow["jobs"][job]["if"] == "github.event_name != 'pull_request'"


# --- the install step ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "install",
    [
        "envbuild==0.1.0",
        "git+https://github.com/acme/envbuild@v0.1.0",
        "envbuild @ git+https://github.com/acme/envbuild@v0.1.0",
        "./tools/envbuild-0.1.0-py3-none-any.whl",
        "vendor/envbuild",
    ],
)
def test_install_reaches_pip_as_one_word(repo, capsys, tmp_path, install):
    workflow = generate(repo, "--install", install, capsys=capsys)
    for job in ("lock-check", "build", "verify", "promote"):
        step = next(s for s in runs(workflow, job) if s.get("name") == "Install envbuild")
        assert step["run"] == f"python -m pip install {shlex.quote(install)}"
        pip = f'pip() {{ printf \'%s\\0\' "$@" > {tmp_path / "argv"}; }}\npython() {{ shift 2; pip "$@"; }}\n'
        subprocess.run(["bash", "-e", "-c", pip + step["run"]], check=True)
        assert (tmp_path / "argv").read_text().split("\0")[:-1] == ["install", install]


@pytest.mark.parametrize(
    "install",
    [
        "envbuild==0.1.0; touch /tmp/pwned",
        "envbuild==0.1.0\ntouch /tmp/pwned",
        "$(touch /tmp/pwned)",
        "`touch /tmp/pwned`",
        "envbuild | tee x",
        "envbuild > x",
        "${{ github.event.issue.title }}",
        "-e .",
        "numpy==2.0",
        "https://user:token@example.com/envbuild.whl",
        "",
    ],
)
def test_install_that_is_no_envbuild_source_is_a_usage_error(repo, capsys, install):
    err = refused(
        capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"), "--install", install
    )
    assert "--install" in err and "fix:" in err
    assert not (repo / "w.yml").exists()


def test_default_install_in_a_source_checkout_is_a_usage_error(repo, capsys):
    # envbuild is not on PyPI: `pip install envbuild==0.1.0`, the old default, installs nothing. This
    # checkout is an editable install (make install), which no runner has: the user must say where from.
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"))
    assert "--install" in err and "not published on PyPI" in err


# PEP 610 direct_url.json as pip writes it for each way envbuild can have been installed.
VCS = {"url": "https://github.com/acme/envbuild", "vcs_info": {"vcs": "git", "commit_id": "a" * 40}}
EDITABLE = {"url": "file:///home/me/envbuild", "dir_info": {"editable": True}}
ARCHIVE = {"url": "https://files.acme.internal/envbuild-0.1.0-py3-none-any.whl", "archive_info": {}}
LOCAL_WHEEL = {"url": "file:///tmp/envbuild-0.1.0-py3-none-any.whl", "archive_info": {}}


def test_default_install_is_where_this_envbuild_came_from():
    from envbuild.scaleout.install import default_install

    assert default_install(VCS, "0.1.0") == f"git+https://github.com/acme/envbuild@{'a' * 40}"
    assert default_install(ARCHIVE, "0.1.0") == ARCHIVE["url"]
    assert default_install(None, "0.1.0") == "envbuild==0.1.0"  # from an index: that index has it
    for local in (EDITABLE, LOCAL_WHEEL):
        with pytest.raises(UsageError) as caught:
            default_install(local, "0.1.0")
        assert "--install" in caught.value.message and caught.value.fix
    with pytest.raises(UsageError):  # a token in the URL it was installed from is not copied into a file
        default_install({**VCS, "url": "https://me:tok@github.com/acme/envbuild"}, "0.1.0")


# --- the secrets ----------------------------------------------------------------------------------------


def header(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))


def test_every_secret_the_workflow_reads_is_named_in_its_header_and_in_the_docs(repo, capsys):
    generate(repo, "--install", INSTALL, capsys=capsys)
    text = (repo / ".github" / "workflows" / "envbuild.yml").read_text()
    used = set(re.findall(r"secrets\.([A-Za-z0-9_]+)", text))
    assert used == {"REGISTRY_USER", "REGISTRY_PASSWORD", "ENVBUILD_LOCK_KEY"}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "ci.md").read_text()
    for name in used:
        assert name in header(text), name
        assert name in docs, name


def sealed(repo: Path) -> None:
    """A lock next to the spec that carries a content-hmac (the generator reads only that line)."""
    (repo / "ml" / "envbuild.lock").write_text(
        '# envbuild.lock\ncontent-digest = "sha256:' + "0" * 64 + '"\n'
        'content-hmac = "hmac-sha256:' + "1" * 64 + '"\nlock-version = 1\n'
    )


def test_steps_that_read_the_lock_get_the_lock_key(repo, capsys):
    sealed(repo)
    workflow = generate(repo, "--install", INSTALL, capsys=capsys)
    for job, text in (("lock-check", "envbuild lock --check"), ("build", "envbuild render")):
        assert step_with(workflow, job, text)["env"] == {
            "ENVBUILD_LOCK_KEY": "${{ secrets.ENVBUILD_LOCK_KEY }}"
        }
    text = (repo / ".github" / "workflows" / "envbuild.yml").read_text()
    assert "ENVBUILD_LOCK_KEY" in header(text) and "required" in header(text)


@pytest.mark.parametrize(("event", "code"), [("push", 1), ("workflow_dispatch", 1), ("pull_request", 0)])
def test_a_sealed_lock_without_its_key_fails_except_on_a_fork_pull_request(
    repo, capsys, tmp_path, event, code
):
    # a sealed lock checked without the key is only digest-checked: on main that must stop the run;
    # a pull request from a fork gets no secrets at all, so it checks what it can and says so
    sealed(repo)
    step = step_with(
        generate(repo, "--install", INSTALL, capsys=capsys), "lock-check", "envbuild lock --check"
    )
    stub = "envbuild() { :; }\n"
    env = {"PATH": "/usr/bin:/bin", "GITHUB_EVENT_NAME": event, "ENVBUILD_LOCK_KEY": ""}
    done = subprocess.run(["bash", "-e", "-c", stub + step["run"]], env=env, capture_output=True, text=True)
    assert done.returncode == code, done.stdout + done.stderr
    assert "ENVBUILD_LOCK_KEY" in done.stdout


# --- pinned actions ---------------------------------------------------------------------------------------


def pin_file(tmp_path: Path, pins: dict[str, str]) -> Path:
    path = tmp_path / "action-pins.txt"
    path.write_text("# action@ref = commit\n\n" + "".join(f"{a} = {sha}\n" for a, sha in pins.items()))
    return path


def test_action_pins_rewrite_every_uses_to_a_commit(repo, capsys, tmp_path):
    pins = pin_file(tmp_path, {action: PIN for action in ACTIONS_USED} | {"unused/action@v1": PIN})
    workflow = generate(repo, "--install", INSTALL, "--action-pins", str(pins), capsys=capsys)
    uses = [s["uses"] for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses and all(re.fullmatch(rf"[a-z-]+/[a-z-]+@{PIN}", u) for u in uses), uses
    text = (repo / ".github" / "workflows" / "envbuild.yml").read_text()
    assert f"uses: actions/checkout@{PIN} # v4\n" in text


def test_an_action_missing_from_the_pin_file_is_a_usage_error(repo, capsys, tmp_path):
    pins = pin_file(tmp_path, {action: PIN for action in ACTIONS_USED if "login" not in action})
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"),
                  "--install", INSTALL, "--action-pins", str(pins))  # fmt: skip
    assert str(pins) in err and "docker/login-action@v3" in err


@pytest.mark.parametrize("sha", ["v4", PIN[:39], PIN.upper() + "0", "main", PIN + " # v4"])
def test_a_pin_that_is_no_commit_sha_is_a_usage_error(repo, capsys, tmp_path, sha):
    pins = pin_file(tmp_path, {action: PIN for action in ACTIONS_USED} | {"actions/checkout@v4": sha})
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"),
                  "--install", INSTALL, "--action-pins", str(pins))  # fmt: skip
    assert str(pins) in err and "actions/checkout@v4" in err and "40" in err


def test_an_unreadable_pin_file_is_a_usage_error(repo, capsys, tmp_path):
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"),
                  "--install", INSTALL, "--action-pins", str(tmp_path / "nope.txt"))  # fmt: skip
    assert "--action-pins" in err and "nope.txt" in err


# --- what the generator was told reaches the commands the workflow runs -----------------------------


def test_base_image_reaches_lock_check_and_render(repo, capsys):
    base = "registry.local:5000/mirror/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    workflow = generate(repo, "--install", INSTALL, "--base-image", base, capsys=capsys)
    for job, text in (("lock-check", "envbuild lock --check"), ("build", "envbuild render")):
        words = shlex.split(step_with(workflow, job, text)["run"].splitlines()[-1])
        assert words[words.index("--base-image") + 1] == base


def test_a_bad_base_image_is_a_usage_error(repo, capsys):
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"),
                  "--install", INSTALL, "--base-image", "bad ref!!")  # fmt: skip
    assert "--base-image" in err


def test_spec_path_in_the_workflow_is_relative_to_the_repository(repo, capsys):
    workflow = generate(repo, "--install", INSTALL, capsys=capsys)
    text = (repo / ".github" / "workflows" / "envbuild.yml").read_text()
    assert str(repo) not in text
    for job, what in (("lock-check", "envbuild lock --check"), ("build", "envbuild render")):
        words = shlex.split(step_with(workflow, job, what)["run"].splitlines()[-1])
        assert words[words.index("-f") + 1] == "ml/envbuild.toml"


def test_a_spec_outside_the_repository_is_a_usage_error(repo, capsys, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "envbuild.toml"
    elsewhere.write_text((repo / "ml" / "envbuild.toml").read_text())
    err = refused(capsys, "-f", str(elsewhere), "-o", str(repo / "w.yml"), "--install", INSTALL)
    assert str(elsewhere) in err and str(repo) in err and "-f" in err


def test_matrix_reaches_the_commands_relative_to_the_repository(repo, capsys, matrix_copy):
    workflow = generate(repo, "--install", INSTALL, "--matrix", str(matrix_copy), capsys=capsys)
    for job, text in (("lock-check", "envbuild lock --check"), ("build", "envbuild render")):
        words = shlex.split(step_with(workflow, job, text)["run"].splitlines()[-1])
        assert words[words.index("--matrix") + 1] == "matrix"


def test_a_matrix_outside_the_repository_is_a_usage_error(repo, capsys, tmp_path_factory, matrix_copy):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "matrix"
    matrix_copy.rename(elsewhere)
    err = refused(capsys, "-f", str(repo / "ml" / "envbuild.toml"), "-o", str(repo / "w.yml"),
                  "--install", INSTALL, "--matrix", str(elsewhere))  # fmt: skip
    assert "--matrix" in err and str(elsewhere) in err


# --- signing envbuild's attestations (issue 20, item 6) ---------------------------------------------------

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPretendKeyMaterialNotARealKey0000000000\n"
    "-----END PRIVATE KEY-----"
)


def test_sign_key_secret_signs_the_attach_step(repo, capsys):
    workflow = generate(repo, "--install", INSTALL, "--sign-key-secret", "TEAM_SIGNING_KEY", capsys=capsys)
    step = step_with(workflow, "promote", "envbuild attest")
    assert step["env"] == {
        "DIGEST": "${{ steps.digest.outputs.digest }}",
        "ENVBUILD_SIGN_KEY": "${{ secrets.TEAM_SIGNING_KEY }}",
    }
    (line,) = [line for line in step["run"].splitlines() if line.startswith("envbuild attest")]
    assert line.endswith(
        ' --attach --report "$(ls verify/*/smoke.json | head -n 1)" --sign-key "$ENVBUILD_SIGN_KEY_FILE"'
    )
    text = (repo / ".github" / "workflows" / "envbuild.yml").read_text()
    assert "TEAM_SIGNING_KEY" in header(text)
    assert set(re.findall(r"secrets\.([A-Za-z0-9_]+)", text)) == {
        "REGISTRY_USER", "REGISTRY_PASSWORD", "ENVBUILD_LOCK_KEY", "TEAM_SIGNING_KEY"
    }  # fmt: skip


def test_without_sign_key_secret_no_key_is_read(repo, capsys):
    workflow = generate(repo, "--install", INSTALL, capsys=capsys)
    for step in [s for s in runs(workflow, "promote") if "envbuild attest" in s["run"]]:
        assert "--sign-key" not in step["run"] and "ENVBUILD_SIGN_KEY" not in step["env"]


def run_attach(step: dict, tmp_path: Path, key: str) -> subprocess.CompletedProcess:
    """The attach step's script in bash, `envbuild` a function that copies the key file it is given
    (and its mode) where the test can read them."""
    seen = tmp_path / "seen"
    stub = (
        'envbuild() { while [ "$#" -gt 0 ]; do if [ "$1" = --sign-key ]; then '
        f'stat -c %a "$2" > {shlex.quote(str(seen))}.mode; cp "$2" {shlex.quote(str(seen))}.key; '
        f'echo "$2" > {shlex.quote(str(seen))}.path; fi; shift; done; }}\n'
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "ENVBUILD_SIGN_KEY": key,
        "DIGEST": "sha256:" + "a" * 64,
        "TMPDIR": str(tmp_path),
    }
    return subprocess.run(["bash", "-e", "-c", stub + step["run"]], env=env, capture_output=True, text=True)


def test_the_signing_key_reaches_envbuild_in_a_0600_file_that_is_removed_and_never_printed(
    repo, capsys, tmp_path
):
    workflow = generate(repo, "--install", INSTALL, "--sign-key-secret", "ENVBUILD_SIGN_KEY", capsys=capsys)
    done = run_attach(step_with(workflow, "promote", "envbuild attest"), tmp_path, PEM)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = tmp_path / "seen"
    assert (tmp_path / "seen.mode").read_text().strip() == "600"
    assert (tmp_path / "seen.key").read_text() == PEM + "\n"
    assert not Path((tmp_path / "seen.path").read_text().strip()).exists()  # removed when the step ends
    assert "PRIVATE KEY" not in done.stdout + done.stderr and "Pretend" not in done.stdout + done.stderr
    assert not seen.exists()


def test_an_empty_signing_secret_fails_the_step_naming_it(repo, capsys, tmp_path):
    workflow = generate(repo, "--install", INSTALL, "--sign-key-secret", "TEAM_SIGNING_KEY", capsys=capsys)
    done = run_attach(step_with(workflow, "promote", "envbuild attest"), tmp_path, "")
    assert done.returncode == 1
    assert "TEAM_SIGNING_KEY" in done.stdout and "empty" in done.stdout
    assert not (tmp_path / "seen.key").exists()  # envbuild never ran


@pytest.mark.parametrize("name", ["1KEY", "GITHUB_KEY", "my-key", "a b", "K}} ${{ x", ""])
def test_a_sign_key_secret_that_is_no_secret_name_is_a_usage_error(repo, capsys, name):
    err = refused(
        capsys,
        "-f",
        str(repo / "ml" / "envbuild.toml"),
        "-o",
        str(repo / "w.yml"),
        "--install",
        INSTALL,
        "--sign-key-secret",
        name,
    )
    assert "--sign-key-secret" in err and "fix:" in err
    assert not (repo / "w.yml").exists()
