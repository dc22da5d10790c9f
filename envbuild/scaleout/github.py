"""A GitHub Actions workflow for a spec, rendered from templates/ci/github-workflow.yml.j2.

The workflow runs the pipeline across runners: lock-check -> build (CPU runner, push a candidate to a
staging repository, by digest) -> verify (GPU runners, one job per target and GPU capability) ->
promote (registry-side, `envbuild promote REPO@sha256:... --to TAG`). The template holds the shape;
this module works out the values (targets, the verify fan-out, the final tags) and the filters every
spec- or flag-derived value goes through: `yaml` and `block` for YAML, `sh` for a word of a `run:`
script, `comment` for the header comment.

Two layers read a `run:` script, so a value in one is quoted twice: shell-quoted (shlex.quote) into the
script, then the script YAML-quoted into the file (scaleout.quoting). The spec and matrix paths are
the values the user chooses freely (directory names), so they are checked for the one thing neither
quoting can stop: `${{`, which the Actions runner substitutes into the script before any shell reads
it. The values both CI generators share (targets, verify fan-out, tags, install, lock seal, the
arguments every envbuild command repeats) come from scaleout.ciplan.
"""

from __future__ import annotations

from envbuild import __version__
from envbuild._util.outputs import check_output, write_output
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.scaleout.actionpins import pin_actions, read_pins
from envbuild.scaleout.bake import PLATFORM
from envbuild.scaleout.ciplan import LOCK_KEY_ENV, ci_plan
from envbuild.scaleout.quoting import comment_text, shell_word, yaml_block, yaml_scalar
from envbuild.scaleout.repopaths import repo_relative, repo_root
from envbuild.spec.model import Spec

TEMPLATE = "ci/github-workflow.yml.j2"
COMMAND = "ci github"
CPU_RUNNER = "ubuntu-latest"
PYTHON = "3.11"
WORKFLOWS_DIR = (".github", "workflows")  # where GitHub reads workflows: created when missing
OUT_DIR = "build"  # where the workflow renders (`envbuild render -o build`)
ACTIONS = {
    "checkout": "actions/checkout@v4",
    "setup_python": "actions/setup-python@v5",
    "setup_buildx": "docker/setup-buildx-action@v3",
    "login_action": "docker/login-action@v3",
    "upload": "actions/upload-artifact@v4",
    "download": "actions/download-artifact@v4",
}
DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"  # grep -E, in the step that reads a build's digest
# Pull requests run lock-check only: a pull request (from a fork, too) must push no candidate and copy
# no tag, and GitHub gives a fork's pull request no secrets to log in with.
NOT_PULL_REQUEST = "github.event_name != 'pull_request'"


def workflow_yaml(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
    staging: str | None = None,
    install: str | None = None,
    base_image: str | None = None,
    matrix_path: str | None = None,
    action_pins: str | None = None,
) -> str:
    """The workflow file.

    spec_path, matrix_path: as the checkout names them (repository-relative; matrix_path None: the
    bundled matrix). gpu_labels: the labels every GPU runner carries (default self-hosted, gpu; each
    verify job adds the sm_XY label of its GPU). staging: the repository candidates are pushed to
    (default the spec's repository). install: what `pip install` gets (default: see scaleout.install).
    base_image: render's and lock --check's --base-image. action_pins: a pin file (scaleout.actionpins).
    """
    for flag, path in (("-f", spec_path), ("--matrix", matrix_path)):
        if path is not None:
            refuse_expression(flag, path)
    plan = ci_plan(
        matrix,
        spec,
        spec_path=spec_path,
        gpu_labels=gpu_labels,
        staging=staging,
        install=install,
        base_image=base_image,
        matrix_path=matrix_path,
    )
    actions = dict(ACTIONS)
    if action_pins is not None:
        actions = pin_actions(actions, read_pins(action_pins), action_pins)
    context = {
        **actions,
        "version": __version__,
        "plan": plan,
        "install": f"python -m pip install {shell_word(plan.install)}",
        "python": PYTHON,
        "cpu_runner": CPU_RUNNER,
        "platform": PLATFORM,
        "out_dir": OUT_DIR,
        "digest_pattern": DIGEST_PATTERN,
        "key_env": LOCK_KEY_ENV,
        "not_pull_request": NOT_PULL_REQUEST,
        "verify_jobs": [
            {"target": job.target, "gpu": job.gpu, "runner": list(job.labels) or [CPU_RUNNER]}
            for job in plan.verify_jobs
        ],
        "promotions": [
            {"target": name, "to": " ".join(f"--to {shell_word(tag)}" for tag in tags)}
            for name, tags in plan.promotions
        ],
    }
    filters = {"yaml": yaml_scalar, "block": yaml_block, "sh": shell_word, "comment": comment_text}
    template = environment(filters).get_template(TEMPLATE)
    return template.render(context)


def write_workflow(
    matrix: Matrix,
    spec: Spec,
    path: str,
    *,
    gpu_labels: list[str] | None = None,
    install: str | None = None,
    base_image: str | None = None,
    matrix_dir: str | None = None,
    action_pins: str | None = None,
) -> None:
    """`envbuild ci github`: the workflow file at `path`.

    The spec (and --matrix) are named relative to the repository `path` is in (scaleout.repopaths): the
    workflow runs in a checkout elsewhere. A missing `.github/workflows/` is created (GitHub reads
    workflows only from there, and a repository without any has none yet); any other missing directory,
    or a directory as `path`, is a UsageError.
    """
    check_output(path, default_name="envbuild.yml", creatable=WORKFLOWS_DIR)
    root = repo_root(path)
    text = workflow_yaml(
        matrix,
        spec,
        spec_path=repo_relative(spec.path, "-f", root, COMMAND),
        gpu_labels=gpu_labels,
        install=install,
        base_image=base_image,
        matrix_path=None if matrix_dir is None else repo_relative(matrix_dir, "--matrix", root, COMMAND),
        action_pins=action_pins,
    )
    write_output(path, text, default_name="envbuild.yml", creatable=WORKFLOWS_DIR)


def refuse_expression(flag: str, path: str) -> None:
    """A path holding `${{` is refused: the runner substitutes expressions into a run: script's text
    before bash sees it, so no quoting can keep what it expands to inside one word."""
    if "${{" in path:
        raise UsageError(
            f"{flag} {path!r}: the path holds '${{{{', which GitHub Actions would evaluate as an "
            "expression inside the workflow's run: scripts",
            fix=f"move it to a path without '${{{{' and run `envbuild {COMMAND} {flag} NEW_PATH` again",
        )
