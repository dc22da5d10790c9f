"""A GitHub Actions workflow for a spec, rendered from templates/ci/github-workflow.yml.j2.

The workflow runs the pipeline across runners: lock-check -> build (CPU runner, push a candidate to a
staging repository, by digest) -> verify (GPU runners, one job per target and GPU capability) ->
promote (registry-side, `envbuild promote REPO@sha256:... --to TAG`). The template holds the shape;
this module works out the values (targets, the verify fan-out, the final tags) and the filters every
spec- or flag-derived value goes through: `yaml` and `block` for YAML, `sh` for a word of a `run:`
script, `comment` for the header comment.

Two layers read a `run:` script, so a value in one is quoted twice: shell-quoted (shlex.quote) into the
script, then the script YAML-quoted into the file. The spec path is the one value the user chooses
freely (a directory name), so it is checked for the one thing neither quoting can stop: `${{`, which
the Actions runner substitutes into the script before any shell reads it.
"""

from __future__ import annotations

import json
import re
import shlex

from envbuild import __version__
from envbuild._util.outputs import write_output
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix, gpu_index
from envbuild.matrix.versions import sm_name
from envbuild.oci.reference import registry_host
from envbuild.render.plan import build_plan
from envbuild.resolve.query import parse_gpu
from envbuild.scaleout.bake import PLATFORM, bake_names
from envbuild.spec.model import Spec

TEMPLATE = "ci/github-workflow.yml.j2"
DEFAULT_GPU_LABELS = ("self-hosted", "gpu")
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


def gpu_runner_labels(matrix: Matrix, spec: Spec, target_name: str, gpu_labels: list[str]) -> list[list[str]]:
    """runs-on label sets for verifying one target: one per distinct capability of its GPUs.

    A runner must carry every label of a runs-on list, so a target for H100 and L4 nodes is verified
    twice, on [self-hosted, gpu, sm_90] and on [self-hosted, gpu, sm_89]; a target naming no GPU
    on any runner with the base labels.
    """
    (target,) = spec.target(target_name)
    index = gpu_index(matrix)
    capabilities: list[str] = []
    for name in target.stack.gpus:
        label = sm_name(parse_gpu(name, matrix, index).cc)
        if label not in capabilities:
            capabilities.append(label)
    if not capabilities:
        return [list(gpu_labels)]
    return [[*gpu_labels, label] for label in capabilities]


def workflow_yaml(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
    staging: str | None = None,
) -> str:
    """The workflow file.

    spec_path: the spec's path in the repository. gpu_labels: the labels every GPU runner carries
    (default self-hosted, gpu; each verify job adds the sm_XY label of its GPU). staging: the
    repository candidates are pushed to (default the spec's repository; registry-side promotion
    copies a manifest within one registry).
    """
    spec_arg = shell_path(spec_path)
    labels = list(gpu_labels) if gpu_labels is not None else list(DEFAULT_GPU_LABELS)
    staging = staging or spec.image.repository
    targets = [t.name for t in spec.targets]
    plans = {t.name: build_plan(matrix, spec, t) for t in spec.targets}
    bake_names(spec)  # the same names must also work as bake targets
    if spec.smoke.device == "gpu":
        verify_jobs = [
            {"target": name, "gpu": runner[-1], "runner": runner}
            for name in targets
            for runner in gpu_runner_labels(matrix, spec, name, labels)
        ]
    else:  # the spec's smoke step runs on CPU: any hosted runner will do
        verify_jobs = [{"target": name, "gpu": "cpu", "runner": [CPU_RUNNER]} for name in targets]
    context = {
        **ACTIONS,
        "version": __version__,
        "install": f"pip install envbuild=={__version__}",
        "python": PYTHON,
        "cpu_runner": CPU_RUNNER,
        "platform": PLATFORM,
        "out_dir": OUT_DIR,
        "digest_pattern": DIGEST_PATTERN,
        "spec_path": spec_path,
        "spec_arg": spec_arg,
        "staging": staging,
        "staging_host": registry_host(staging),
        "promote_hosts": list(dict.fromkeys([registry_host(staging), registry_host(spec.image.repository)])),
        "targets": targets,
        "verify_jobs": verify_jobs,
        "smoke": spec.smoke,
        "promotions": [
            {"target": name, "to": " ".join(f"--to {shell_word(tag)}" for tag in plans[name].tags)}
            for name in targets
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
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
) -> None:
    """`envbuild ci github`: the workflow file at `path`.

    A missing `.github/workflows/` is created (GitHub reads workflows only from there, and a repository
    without any has none yet); any other missing directory, or a directory as `path`, is a UsageError.
    """
    text = workflow_yaml(matrix, spec, spec_path=spec_path, gpu_labels=gpu_labels)
    write_output(path, text, default_name="envbuild.yml", creatable=WORKFLOWS_DIR)


# --- shell quoting: one word of a run: script -----------------------------------------------------


def shell_word(value: object) -> str:
    """`value` as one bash word that reads back as exactly its text (the template's `sh` filter)."""
    return shlex.quote(str(value))


def shell_path(path: str) -> str:
    """The spec path as the word after `-f` in a run: script.

    `./` goes before a path that starts with `-`, which would otherwise be read as an option. A path
    holding `${{` is refused: the runner substitutes expressions into the script's text before bash
    sees it, so no quoting can keep what it expands to inside one word.
    """
    if "${{" in path:
        raise UsageError(
            f"-f {path!r}: the spec path holds '${{{{', which GitHub Actions would evaluate as an "
            "expression inside the workflow's run: scripts",
            fix="move the spec to a path without '${{' and run `envbuild ci github -f NEW_PATH` again",
        )
    return shell_word(f"./{path}" if path.startswith("-") else path)


def comment_text(value: str) -> str:
    """Text for the end of a `#` comment line: as is when every character is printable (no line or
    paragraph separator, which YAML 1.1 reads as a line break), else as a JSON string on one line."""
    return value if value.isprintable() else json.dumps(value)


# --- YAML quoting: the template's scalar filters ---------------------------------------------------

# Plain (unquoted) only when YAML 1.1 and 1.2 both read the text back as this same string.
_PLAIN_RE = re.compile(r"^[A-Za-z_/$][A-Za-z0-9_./@+=$,:{}()\[\]'\" -]*$")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _plain(text: str) -> bool:
    return (
        bool(_PLAIN_RE.match(text))
        and text == text.strip()
        and text.lower() not in _RESERVED
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
    )


def yaml_scalar(value: object) -> str:
    """A YAML scalar that reads back as `value`: plain when that is unambiguous, else double-quoted
    (a JSON string is a valid YAML double-quoted string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} as YAML")
    return value if _plain(value) else json.dumps(value)


def _literal(value: str) -> bool:
    """Whether a `|` block holds `value` exactly: one final newline, printable, no trailing spaces."""
    return (
        "\n" in value.rstrip("\n")
        and value.endswith("\n")
        and not value.endswith("\n\n")
        and not value.startswith((" ", "\n"))
        and all(c == "\n" or c.isprintable() for c in value)
        and not any(line != line.rstrip() for line in value.splitlines())
    )


def yaml_block(value: str, indent: int) -> str:
    """Multi-line text after `key: `: a literal block indented by `indent`, or a scalar when a block
    would not read back as the same text."""
    if not _literal(value):
        return yaml_scalar(value)
    pad = " " * indent
    return "|\n" + "\n".join(f"{pad}{line}" if line else "" for line in value[:-1].split("\n"))
