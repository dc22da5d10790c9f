"""A GitHub Actions workflow for a spec, rendered from templates/ci/github-workflow.yml.j2.

The workflow runs the pipeline across runners: lock-check -> build (CPU runner, push a candidate to a
staging repository, by digest) -> verify (GPU runners, one job per target and GPU capability: the
audit gate for its GPUs, then the smoke step with the spec's settings, ciplan.verify_command) ->
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

Platforms: a spec whose targets are all linux/amd64 gets the workflow it always got. Otherwise each
target is built once per platform (ciplan.Build), natively: linux/arm64 on GitHub's hosted arm64 Linux
runner, linux/amd64 on ubuntu-latest; or, with `qemu=True` (`ci github --qemu`), every build on an
x86_64 runner with docker/setup-qemu-action (emulated builds take several times as long: docs/ci.md).
Each platform's candidate is verified on its own (a GPU runner also carries its machine's
architecture label), and promote pushes one multi-platform index over the verified digests
(`envbuild promote A@sha256:.. B@sha256:.. --to TAG --report .. --report ..`).

Supply chain (issue 20): the build asks BuildKit for its own SBOM and max-mode provenance
(BUILDKIT_ATTESTATIONS; setup-buildx-action's docker-container builder can make them), and once promote
has succeeded, the promote job attaches envbuild's GPU-aware SBOM and provenance to each promoted
digest in the final repository (attach_script): `envbuild attest REPO@DIGEST --attach --report
<its verify job's smoke.json>` (the lock's hashes from the checkout's envbuild.lock), signed with
`--sign-key` when `ci github --sign-key-secret NAME` names the repository secret holding the private
key (written to a 0600 temporary file, never echoed).
"""

from __future__ import annotations

import re

from envbuild import __version__
from envbuild._util.outputs import check_output
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.oci.reference import split_tag
from envbuild.scaleout.actionpins import pin_actions, read_pins
from envbuild.scaleout.ciplan import (
    BUILDKIT_ATTESTATIONS,
    LOCK_KEY_ENV,
    CiPlan,
    VerifyJob,
    ci_plan,
    verify_command,
)
from envbuild.scaleout.generated import emit
from envbuild.scaleout.quoting import comment_text, shell_word, yaml_block, yaml_scalar
from envbuild.scaleout.repopaths import repo_relative, repo_root
from envbuild.spec.model import Spec

TEMPLATE = "ci/github-workflow.yml.j2"
COMMAND = "ci github"
CPU_RUNNER = "ubuntu-latest"
# GitHub's hosted arm64 Linux runners (ubuntu-24.04-arm, ubuntu-22.04-arm), free for public repositories:
# https://github.blog/changelog/2025-01-16-linux-arm64-hosted-runners-now-available-for-free-in-public-repositories-public-preview/
# (a private repository without them: `ci github --qemu`)
NATIVE_RUNNERS = {"linux/amd64": CPU_RUNNER, "linux/arm64": "ubuntu-24.04-arm"}
# The architecture label every self-hosted runner gets by default (x64, ARM, ARM64), so a GPU verify job
# of one platform lands on a machine of that platform:
# https://docs.github.com/en/actions/how-tos/manage-runners/self-hosted-runners/use-in-a-workflow
RUNNER_ARCH_LABELS = {"linux/amd64": "x64", "linux/arm64": "ARM64"}
QEMU_ACTION = "docker/setup-qemu-action@v3"
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
# A GitHub secret name: letters, digits and _, not starting with a digit or GITHUB_
# (https://docs.github.com/en/actions/security-for-github-actions/security-guides/using-secrets-in-github-actions#naming-your-secrets)
SECRET_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SIGN_KEY_ENV = "ENVBUILD_SIGN_KEY"  # the attach step's environment: the private key's PEM text
SIGN_KEY_FILE_ENV = "ENVBUILD_SIGN_KEY_FILE"  # ... and the 0600 file it is written to


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
    qemu: bool = False,
    sign_key_secret: str | None = None,
) -> str:
    """The workflow file.

    spec_path, matrix_path: as the checkout names them (repository-relative; matrix_path None: the
    bundled matrix). gpu_labels: the labels every GPU runner carries (default self-hosted, gpu; each
    verify job adds the sm_XY label of its GPU). staging: the repository candidates are pushed to
    (default the spec's repository). install: what `pip install` gets (default: see scaleout.install).
    base_image: render's and lock --check's --base-image. action_pins: a pin file (scaleout.actionpins).
    qemu: build (and CPU-verify) every platform on x86_64 runners under QEMU rather than natively.
    sign_key_secret: the repository secret holding the key that signs envbuild's attestations.
    """
    if sign_key_secret is not None:
        check_secret_name(sign_key_secret)
    for flag, path in (("-f", spec_path), ("--matrix", matrix_path)):
        if path is not None:
            refuse_expression(flag, path)
    for skip in spec.audit_skip:  # free text the verify jobs' run: scripts carry
        if "${{" in skip.reason:
            raise UsageError(
                f"[audit] skip for {skip.library}: the reason holds '${{{{', which GitHub Actions would "
                "evaluate as an expression inside the verify job's run: script",
                fix="reword the reason without '${{' and run `envbuild ci github` again",
            )
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
    qemu = qemu and any(build.platform != DEFAULT_PLATFORM for build in plan.builds)
    if qemu:  # only a workflow that uses it names it (and needs its pin)
        actions["setup_qemu"] = QEMU_ACTION
    if action_pins is not None:
        actions = pin_actions(actions, read_pins(action_pins), action_pins)
    context = {
        **actions,
        "version": __version__,
        "plan": plan,
        "install": f"python -m pip install {shell_word(plan.install)}",
        "python": PYTHON,
        "cpu_runner": CPU_RUNNER,
        "platform": "${{ matrix.platform }}" if plan.platformed else DEFAULT_PLATFORM,
        "context_key": "context" if plan.platformed else "target",
        "qemu": qemu,
        "builds": [
            {
                **{name: getattr(build, name) for name in build.__slots__},
                "runner": _runner(build.platform, qemu),
                "emulated": _emulated(build.platform, qemu),
            }
            for build in plan.builds
        ],
        "out_dir": OUT_DIR,
        "digest_pattern": DIGEST_PATTERN,
        "key_env": LOCK_KEY_ENV,
        "not_pull_request": NOT_PULL_REQUEST,
        "verify_jobs": [
            {
                "target": job.target,
                "gpu": job.gpu,
                "runner": _verify_runner(job, plan, qemu),
                "build": job.build,
                "platform": job.platform,
                "emulated": not job.labels and _emulated(job.platform, qemu),
            }
            for job in plan.verify_jobs
        ],
        "verify_steps": verify_steps(plan),
        "promotions": [
            {
                "target": name,
                "to": " ".join(f"--to {shell_word(tag)}" for tag in tags),
                "script": promote_script([b.key for b in plan.builds if b.target == name], tags),
                "attach": attach_script(
                    [b for b in plan.builds if b.target == name], tags, plan.platformed, sign_key_secret
                ),
            }
            for name, tags in plan.promotions
        ],
        "buildkit_attestations": " ".join(BUILDKIT_ATTESTATIONS),
        "sign_key_secret": sign_key_secret,
        "sign_key_env": SIGN_KEY_ENV,
    }
    filters = {"yaml": yaml_scalar, "block": yaml_block, "sh": shell_word, "comment": comment_text}
    template = environment(filters).get_template(TEMPLATE)
    return template.render(context)


def verify_steps(plan: CiPlan) -> list[dict]:
    """The verify job's audit-and-smoke steps: one per target and GPU capability, each with its own
    command (ciplan.verify_command: its GPUs differ), and, when there are several, the `if:` that picks
    the one of the matrix entry (every entry matches exactly one; a platform's entries share theirs)."""
    steps: dict[tuple[str, str], VerifyJob] = {}
    for job in plan.verify_jobs:
        steps.setdefault((job.target, job.gpu), job)
    several = len(steps) > 1
    return [
        {
            "name": f"{job.target}: audit for {', '.join(job.gpus)}, then the smoke training step "
            f"({plan.smoke.device})"
            if job.gpus
            else f"{job.target}: the smoke training step ({plan.smoke.device}; no GPU named to audit for)",
            "if": f"matrix.target == '{job.target}' && matrix.gpu == '{job.gpu}'" if several else None,
            "command": verify_command(plan, job, "smoke.json"),
        }
        for job in steps.values()
    ]


def _runner(platform: str, qemu: bool) -> str:
    """The hosted runner that builds `platform`: natively, or with qemu every one on x86_64."""
    return CPU_RUNNER if qemu else NATIVE_RUNNERS[platform]


def _emulated(platform: str, qemu: bool) -> bool:
    return qemu and platform != DEFAULT_PLATFORM


def _verify_runner(job: VerifyJob, plan: CiPlan, qemu: bool) -> list[str]:
    """A GPU verify job's labels, with its machine's architecture label when the spec builds other
    platforms (an amd64-only spec keeps the labels it always had); a CPU one: a hosted runner."""
    labels = list(job.labels)
    if not labels:
        return [_runner(job.platform, qemu) if plan.platformed else CPU_RUNNER]
    if plan.platformed:
        labels.append(RUNNER_ARCH_LABELS[job.platform])
    return labels


def promote_script(builds: list[str], tags: tuple[str, ...]) -> str:
    """The promote step of one target of a multi-platform spec: each build's digest (checked) and its
    first verify record; one build promotes that image, several push one multi-platform index."""
    to = " ".join(f"--to {shell_word(tag)}" for tag in tags)
    return (
        "images=()\n"
        "reports=()\n"
        f"for build in {' '.join(shell_word(b) for b in builds)}; do\n"
        '  digest="$(cat "digest-$build.txt")"\n'
        f"  if ! printf '%s' \"$digest\" | grep -Eq '{DIGEST_PATTERN}'; then\n"
        '    echo "::error::digest-$build.txt holds no sha256 digest: $digest"\n'
        "    exit 1\n"
        "  fi\n"
        '  images+=("$STAGING@$digest")\n'
        '  reports+=(--report "$(ls verify/record-verify-"$build"-*/smoke.json | head -n 1)")\n'
        "done\n"
        f'envbuild promote "${{images[@]}}" {to} "${{reports[@]}}"\n'
    )


def attach_script(builds: list, tags: tuple[str, ...], platformed: bool, sign_key_secret: str | None) -> str:
    """The step after promote that attaches envbuild's SBOM and provenance to each promoted digest.

    They go to every repository the target is promoted into (registry-side promotion keeps the
    digest, and the referrers API is per repository), never to staging alone. A single-platform spec
    attaches to the digest the job read ($DIGEST); a multi-platform one to each platform's manifest
    (the documents describe one platform's image; the index promote pushes is new). With a signing
    secret, the key is written to a 0600 temporary file, removed when the step ends, never printed.
    """
    repositories = list(dict.fromkeys(split_tag(tag)[0] for tag in tags))
    sign = f' --sign-key "${SIGN_KEY_FILE_ENV}"' if sign_key_secret else ""
    lines = []
    if sign_key_secret:
        lines += [
            f'if [ -z "${SIGN_KEY_ENV}" ]; then',
            f'  echo "::error::the {sign_key_secret} secret is empty: it must hold the PEM private key that '
            'signs the attestations (docs/ci.md)"',
            "  exit 1",
            "fi",
            "umask 077",
            f'{SIGN_KEY_FILE_ENV}="$(mktemp)"',
            f"trap 'rm -f \"${SIGN_KEY_FILE_ENV}\"' EXIT",
            f'chmod 600 "${SIGN_KEY_FILE_ENV}"',
            f'printf \'%s\\n\' "${SIGN_KEY_ENV}" > "${SIGN_KEY_FILE_ENV}"',
        ]
    if not platformed:
        for repository in repositories:
            lines.append(
                f'envbuild attest {shell_word(repository + "@")}"$DIGEST" --attach '
                f'--report "$(ls verify/*/smoke.json | head -n 1)"{sign}'
            )
        return "\n".join(lines) + ("\n" if len(lines) > 1 else "")  # one line: a plain run: scalar
    lines += [
        "attach() {",
        '  digest="$(cat "digest-$1.txt")"',
        f"  if ! printf '%s' \"$digest\" | grep -Eq '{DIGEST_PATTERN}'; then",
        '    echo "::error::digest-$1.txt holds no sha256 digest: $digest"',
        "    exit 1",
        "  fi",
        *(
            f'  envbuild attest {shell_word(repository + "@")}"$digest" --attach '
            f'--report "$(ls verify/record-verify-"$1"-*/smoke.json | head -n 1)"{sign}'
            for repository in repositories
        ),
        "}",
    ]
    for build in builds:
        lines.append(f"attach {shell_word(build.key)}")
    return "\n".join(lines) + "\n"


def check_secret_name(name: str) -> str:
    """A name GitHub accepts for a repository secret, so `secrets.NAME` reads it (and nothing else
    reaches the workflow's expression)."""
    if not SECRET_NAME_RE.fullmatch(name) or name.upper().startswith("GITHUB_"):
        raise UsageError(
            f"--sign-key-secret {name!r} is not a GitHub secret name (letters, digits and _, not "
            "starting with a digit or GITHUB_)",
            fix="name the repository secret that holds the signing key, e.g. --sign-key-secret "
            f"{SIGN_KEY_ENV}",
        )
    return name


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
    qemu: bool = False,
    sign_key_secret: str | None = None,
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
        qemu=qemu,
        sign_key_secret=sign_key_secret,
    )
    emit(path, text)


def refuse_expression(flag: str, path: str) -> None:
    """A path holding `${{` is refused: the runner substitutes expressions into a run: script's text
    before bash sees it, so no quoting can keep what it expands to inside one word."""
    if "${{" in path:
        raise UsageError(
            f"{flag} {path!r}: the path holds '${{{{', which GitHub Actions would evaluate as an "
            "expression inside the workflow's run: scripts",
            fix=f"move it to a path without '${{{{' and run `envbuild {COMMAND} {flag} NEW_PATH` again",
        )
