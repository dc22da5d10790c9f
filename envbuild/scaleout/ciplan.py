"""What every CI generator (`ci github`, `ci gitlab`) writes, worked out and checked once.

Both run the same pipeline: lock-check -> build (a CPU runner pushes a candidate to the staging
repository, by digest) -> verify (GPU runners, one job per target and GPU capability, each running
`envbuild build`'s gates: the audit for its GPUs, then the smoke step with the spec's [smoke] settings,
one command written by verify_command for both) -> promote (registry-side, by digest). This module
holds the values: the targets, the verify fan-out, the final tags, the registries to log in to, where
envbuild is installed from, whether the lock is sealed, and the words every `envbuild` command of the
pipeline repeats (-f SPEC, --matrix, --base-image), so a workflow reproduces what the generator was
told. Each generator's module only fills its template.
"""

from __future__ import annotations

from envbuild._util import toml
from envbuild._util.record import Record
from envbuild.errors import UsageError
from envbuild.lockfile.model import lock_path
from envbuild.lockfile.seal import KEY_ENV
from envbuild.matrix.model import Matrix, gpu_index
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.versions import sm_name
from envbuild.oci.reference import registry_host
from envbuild.plan.builds import builds as spec_builds
from envbuild.plan.plan import build_plan
from envbuild.resolve.precision import gpus_precision
from envbuild.resolve.query import parse_gpu
from envbuild.scaleout.bake import bake_names
from envbuild.scaleout.install import install_source
from envbuild.scaleout.quoting import shell_word
from envbuild.spec.model import SMOKE_SETTINGS, Spec
from envbuild.spec.validate import image_ref

DEFAULT_GPU_LABELS = ("self-hosted", "gpu")
# BuildKit's own attestations, asked of every candidate build by both generators (docker buildx
# build's shorthands for --attest type=sbom / type=provenance,mode=max; they need a docker-container
# builder or the containerd store: https://docs.docker.com/build/attestations/)
BUILDKIT_ATTESTATIONS = ("--sbom=true", "--provenance=mode=max")


class VerifyJob(Record):
    """One verify job: the audit gate for `gpus`, then the smoke step, on a runner with `labels`.

    gpus: the target's GPUs as the spec names them that this job's audit judges: those of its capability
    on a GPU runner, every one on a CPU one, so that the jobs of a target together judge exactly the
    GPUs `envbuild build`'s gate does (a target naming none: none, and no audit).

    precision: what its smoke step trains in: the spec's [smoke] precision where its GPUs have it, else
    the nearest they have (resolve.precision, the smoke program's own rule), so that a V100 runner of a
    bf16 target smokes in fp16 while the target's A100 runner keeps bf16; resolve and render warn."""

    __slots__ = ("target", "gpu", "labels", "build", "platform", "gpus", "precision")
    target: str
    gpu: str  # sm_XY, or "cpu" when the spec's smoke step runs on CPU
    labels: tuple[str, ...]  # the runner labels (GitHub) / tags (GitLab); () for CPU: any runner
    build: str  # the Build.key whose candidate it verifies
    platform: str
    gpus: tuple[str, ...]
    precision: str


class Build(Record):
    """One image the build job makes: a target on one platform.

    key: names its candidate tag, cache and artifacts: the target's name, or <target>-<arch> for one
    platform of a target with several. context: its rendered context under render's -o directory
    (plan.builds.TargetBuild.context): <target>, or <target>/<arch>."""

    __slots__ = ("key", "target", "platform", "context")
    key: str
    target: str
    platform: str
    context: str


class CiPlan(Record):
    __slots__ = (
        "spec_path",
        "spec_arg",
        "extra_args",
        "matrix_args",
        "install",
        "sealed",
        "staging",
        "staging_host",
        "promote_hosts",
        "targets",
        "verify_jobs",
        "promotions",
        "smoke",
        "audit_skip",
        "builds",
        "platformed",
    )
    spec_path: str  # as the checkout names it
    spec_arg: str  # the word after -f in a script (shell-quoted)
    extra_args: str  # " --matrix M --base-image B" for lock --check and render, shell-quoted, or ""
    matrix_args: str  # " --matrix M" for verify (its --gpu names), shell-quoted, or ""
    install: str  # the pip argument that installs envbuild (not yet quoted)
    sealed: bool  # the lock next to the spec carries a content-hmac: CI needs ENVBUILD_LOCK_KEY
    staging: str
    staging_host: str
    promote_hosts: tuple[str, ...]
    targets: tuple[str, ...]
    verify_jobs: tuple[VerifyJob, ...]
    promotions: tuple[tuple[str, tuple[str, ...]], ...]  # (target, final tags)
    smoke: object  # the spec's SmokeSpec
    audit_skip: tuple  # the spec's [audit] skip (audit.skip.AuditSkip): the verify jobs' audit honours them
    builds: tuple[Build, ...]  # per target and platform, in spec order
    platformed: bool  # some target is built for other platforms than linux/amd64 alone


def ci_plan(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
    staging: str | None = None,
    install: str | None = None,
    base_image: str | None = None,
    matrix_path: str | None = None,
) -> CiPlan:
    """The pipeline's values. spec_path and matrix_path: as the checkout names them (repository-
    relative); gpu_labels: what every GPU runner carries (each verify job adds its sm_XY); staging: where
    candidates go (default the spec's repository: registry-side promotion copies within a registry)."""
    labels = tuple(gpu_labels) if gpu_labels is not None else DEFAULT_GPU_LABELS
    staging = staging or spec.image.repository
    targets = tuple(t.name for t in spec.targets)
    bake_names(spec, matrix)  # the same names must also work as bake targets
    matrix_args = "" if matrix_path is None else f" --matrix {path_word(matrix_path)}"
    extra = matrix_args
    if base_image is not None:
        try:
            image_ref(base_image)
        except ValueError as exc:
            raise UsageError(
                f"--base-image {base_image!r} {exc}", fix="pass the image reference render and build use"
            ) from None
        extra += f" --base-image {shell_word(base_image)}"
    builds = tuple(
        Build(key=build.key, target=build.target.name, platform=build.platform, context=build.context)
        for build in spec_builds(matrix, spec)
    )
    verify = []
    index = gpu_index(matrix)
    for build in builds:  # each platform's image is verified on its own, on a runner of its machine
        (target,) = spec.target(build.target)
        if spec.smoke.device == "gpu":
            for runner, gpus in gpu_runners(matrix, target.stack.gpus, list(labels)):
                rows = [parse_gpu(name, matrix, index) for name in gpus]
                verify.append(
                    VerifyJob(
                        target=build.target,
                        gpu=runner[-1],
                        labels=tuple(runner),
                        build=build.key,
                        platform=build.platform,
                        gpus=gpus,
                        precision=gpus_precision(spec.smoke.precision, rows),
                    )
                )
        else:  # the spec's smoke step runs on CPU: any runner of the platform will do
            verify.append(
                VerifyJob(
                    target=build.target,
                    gpu="cpu",
                    labels=(),
                    build=build.key,
                    platform=build.platform,
                    gpus=target.stack.gpus,
                    precision=spec.smoke.precision,  # the program's own CPU rule applies in the job
                )
            )
    promotions = tuple(
        (t.name, tuple(build_plan(matrix, spec, t, base_image=base_image).tags)) for t in spec.targets
    )
    return CiPlan(
        spec_path=spec_path,
        spec_arg=path_word(spec_path),
        extra_args=extra,
        matrix_args=matrix_args,
        install=install_source(install),
        sealed=lock_sealed(spec),
        staging=staging,
        staging_host=registry_host(staging),
        promote_hosts=tuple(dict.fromkeys([registry_host(staging), registry_host(spec.image.repository)])),
        targets=targets,
        verify_jobs=tuple(verify),
        promotions=promotions,
        smoke=spec.smoke,
        audit_skip=spec.audit_skip,
        builds=builds,
        platformed=any(build.platform != DEFAULT_PLATFORM or build.key != build.target for build in builds),
    )


def gpu_runners(
    matrix: Matrix, gpus: tuple[str, ...], gpu_labels: list[str]
) -> list[tuple[list[str], tuple[str, ...]]]:
    """(runner labels, the GPUs of that capability, as the spec names them) for verifying one target's
    GPUs: one per distinct capability.

    A runner must carry every label of the set, so a target for H100 and L4 nodes is verified twice,
    on [self-hosted, gpu, sm_90] and on [self-hosted, gpu, sm_89]; a target naming no GPU on any runner
    with the base labels (and judges no GPU).
    """
    index = gpu_index(matrix)
    by_capability: dict[str, list[str]] = {}
    for name in gpus:
        by_capability.setdefault(sm_name(parse_gpu(name, matrix, index).cc), []).append(name)
    if not by_capability:
        return [(list(gpu_labels), ())]
    return [([*gpu_labels, label], tuple(names)) for label, names in by_capability.items()]


def verify_command(plan: CiPlan, job: VerifyJob, report: str) -> str:
    """The verify job's command: `envbuild build`'s gates for this job's candidate, "$IMAGE". First the
    audit gate for the job's GPUs (`--gpu`, looked up in the generator's matrix), then the smoke step
    with every [smoke] setting of the spec that has a flag (spec.model.SMOKE_SETTINGS; the precision as
    the job's GPUs have it, job.precision), and the spec's
    [audit] skip decisions as --skip-audit: the values build
    passes, written out so the file shows them and an image's labels cannot change them. Every value is
    one shell word; `report` is the --report path."""
    audit = "".join(f" --gpu {shell_word(name)}" for name in job.gpus)
    if job.gpus:  # the spec's [audit] skip, as build's gate honours it (no audit runs without --gpu)
        audit += "".join(
            f" --skip-audit {shell_word(f'{skip.library}={skip.reason}')}" for skip in plan.audit_skip
        )
    smoke = "".join(
        f" {setting.flag} {shell_word(setting.codec.write(smoke_value(plan, job, setting.field)))}"
        for setting in SMOKE_SETTINGS
        if setting.flag
    )
    return f'envbuild verify "$IMAGE"{audit}{plan.matrix_args}{smoke} --report {shell_word(report)}'


def smoke_value(plan: CiPlan, job: VerifyJob, field: str) -> object:
    """A [smoke] setting as `job` runs it: the spec's, but the precision its GPUs have (job.precision)."""
    return job.precision if field == "precision" else getattr(plan.smoke, field)


def path_word(path: str) -> str:
    """A path as one word of a script: `./` before one that starts with `-` (else an option)."""
    return shell_word(f"./{path}" if path.startswith("-") else path)


def lock_sealed(spec: Spec) -> bool:
    """Whether the lock next to the spec carries a content-hmac (`envbuild lock` with a key wrote it):
    then every job that reads it must have the key, or the HMAC goes unchecked. A missing or unreadable
    lock is not sealed; `lock --check` in the workflow reports it."""
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular

    try:
        text = read_regular(lock_path(spec.path), limit=limits.FILE_BYTES.get()).decode("utf-8")
        return "content-hmac" in toml.loads(text)
    except (OSError, UnicodeDecodeError, toml.TOMLDecodeError, NotReadable):
        return False


LOCK_KEY_ENV = KEY_ENV
