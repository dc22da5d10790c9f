"""A GitLab CI pipeline (.gitlab-ci.yml) for a spec, rendered from templates/ci/gitlab-ci.yml.j2.

The same pipeline as `ci github` (the values come from scaleout.ciplan): lock-check -> build (render
every context once, then one job per target on a Docker executor with the docker:dind service pushes a
candidate by digest) -> verify (one job per target and GPU capability, on shell-executor GPU runners
tagged `gpu` + `sm_XY`) -> promote (registry-side, by digest). Jobs are written out one per target
rather than with `parallel: matrix`, so each `needs:` names exactly the jobs whose artifacts it reads:
a build job hands its digest on as a dotenv report (DIGEST), each verify job its smoke report under
verify/<gpu>/.

Supply chain (issue 20): the build asks BuildKit for its SBOM and max-mode provenance (the job's
docker-container builder can make them), and each promote job, once promote has succeeded, attaches
envbuild's SBOM and provenance to the promoted digest in the final repository (`envbuild attest
REPO@DIGEST --attach --report <a verify job's smoke.json>`, the lock's hashes read from the checkout's
envbuild.lock). Signing is not written here: docs/ci.md says how to add `--sign-key` with a file-type
CI/CD variable.

Multi-platform specs are refused (refuse_platforms): the pipeline builds linux/amd64 on a docker:dind
executor, and GitLab's hosted arm64 runners, QEMU and per-platform verify jobs are not written here
yet; `ci github` writes them, and `envbuild bake` builds each platform.

GitLab runs `script:` lines with a POSIX shell and does not expand variables inside them (it does in
`tags:` and `variables:`), so the quoting is the GitHub generator's (scaleout.quoting) and a runner tag
holding `$` is refused.
"""

from __future__ import annotations

from envbuild import __version__
from envbuild._util.outputs import check_output
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.oci.reference import split_tag
from envbuild.scaleout.ciplan import BUILDKIT_ATTESTATIONS, LOCK_KEY_ENV, ci_plan, verify_command
from envbuild.scaleout.generated import emit
from envbuild.scaleout.quoting import comment_text, shell_word, yaml_block, yaml_scalar
from envbuild.scaleout.repopaths import repo_relative, repo_root
from envbuild.spec.model import Spec
from envbuild.spec.validate import reject_unsafe_text

TEMPLATE = "ci/gitlab-ci.yml.j2"
COMMAND = "ci gitlab"
DEFAULT_GPU_TAGS = ("gpu",)
PYTHON_IMAGE = "python:3.11"
DOCKER_IMAGE = "docker:27"  # the CLI with the buildx plugin
DIND_SERVICE = "docker:27-dind"
OUT_DIR = "build"
DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"


def pipeline_yaml(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_tags: list[str] | None = None,
    staging: str | None = None,
    install: str | None = None,
    base_image: str | None = None,
    matrix_path: str | None = None,
) -> str:
    """The .gitlab-ci.yml text. The arguments are `ci github`'s (github.workflow_yaml); gpu_tags are
    the tags every GPU runner carries (default gpu; each verify job adds the sm_XY of its GPU)."""
    tags = list(gpu_tags) if gpu_tags is not None else list(DEFAULT_GPU_TAGS)
    for tag in tags:
        check_tag(tag)
    plan = ci_plan(
        matrix,
        spec,
        spec_path=spec_path,
        gpu_labels=tags,
        staging=staging,
        install=install,
        base_image=base_image,
        matrix_path=matrix_path,
    )
    refuse_platforms(plan.builds, spec.path)
    context = {
        "version": __version__,
        "plan": plan,
        "install": f"python -m pip install {shell_word(plan.install)}",
        "python_image": PYTHON_IMAGE,
        "docker_image": DOCKER_IMAGE,
        "dind_service": DIND_SERVICE,
        "platform": DEFAULT_PLATFORM,
        "out_dir": OUT_DIR,
        "digest_pattern": DIGEST_PATTERN,
        "key_env": LOCK_KEY_ENV,
        "verify_jobs": [
            {
                "name": f"verify:{job.target}:{job.gpu}",
                "target": job.target,
                "gpu": job.gpu,
                "tags": job.labels,
                # envbuild build's gates: the audit for the job's GPUs, then the smoke step
                "command": verify_command(plan, job, f"verify/{job.gpu}/smoke.json"),
            }
            for job in plan.verify_jobs
        ],
        "promotions": [
            {
                "target": name,
                "to": " ".join(f"--to {shell_word(tag)}" for tag in tags),
                "attach": [
                    f'envbuild attest {shell_word(repository + "@")}"$DIGEST" --attach '
                    '--report "$(ls verify/*/smoke.json | head -n 1)"'
                    for repository in dict.fromkeys(split_tag(tag)[0] for tag in tags)
                ],
            }
            for name, tags in plan.promotions
        ],
        "buildkit_attestations": " ".join(BUILDKIT_ATTESTATIONS),
    }
    filters = {"yaml": yaml_scalar, "block": yaml_block, "sh": shell_word, "comment": comment_text}
    return environment(filters).get_template(TEMPLATE).render(context)


def write_pipeline(
    matrix: Matrix,
    spec: Spec,
    path: str,
    *,
    gpu_tags: list[str] | None = None,
    install: str | None = None,
    base_image: str | None = None,
    matrix_dir: str | None = None,
) -> None:
    """`envbuild ci gitlab`: the pipeline file at `path`, naming the spec (and --matrix) relative to
    the repository `path` is in (scaleout.repopaths)."""
    check_output(path, default_name=".gitlab-ci.yml")
    root = repo_root(path)
    text = pipeline_yaml(
        matrix,
        spec,
        spec_path=repo_relative(spec.path, "-f", root, COMMAND),
        gpu_tags=gpu_tags,
        install=install,
        base_image=base_image,
        matrix_path=None if matrix_dir is None else repo_relative(matrix_dir, "--matrix", root, COMMAND),
    )
    emit(path, text)


def refuse_platforms(builds: tuple, spec_path: str) -> None:
    """A pipeline that built linux/amd64 for an arm64 target would be wrong without a word: refuse."""
    other = [b for b in builds if b.platform != DEFAULT_PLATFORM]
    if other:
        targets = ", ".join(dict.fromkeys(f"{b.target!r} ({b.platform})" for b in other))
        raise UsageError(
            f"{spec_path}: `envbuild {COMMAND}` builds linux/amd64 only, and target {targets} is for "
            "another platform",
            fix="use `envbuild ci github` (it builds each platform on its own runner), or build each "
            "platform with `envbuild bake` / `envbuild build` on a runner of that platform",
        )


def check_tag(tag: str) -> str:
    """A runner tag GitLab reads as written: printable, one line, no `$` (GitLab expands variables in
    `tags:`), not empty."""
    try:
        reject_unsafe_text(tag)
    except ValueError as exc:
        raise UsageError(f"--gpu-tag {tag!r} {exc}", fix="pass the tag the GPU runner carries") from None
    if not tag.strip() or "$" in tag:
        raise UsageError(
            f"--gpu-tag {tag!r}: a runner tag must be non-empty and hold no '$' (GitLab expands "
            "variables in tags)",
            fix="pass the tag the GPU runner carries",
        )
    return tag
