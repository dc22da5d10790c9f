"""What every CI generator (`ci github`, `ci gitlab`) writes, worked out and checked once.

Both run the same pipeline: lock-check -> build (a CPU runner pushes a candidate to the staging
repository, by digest) -> verify (GPU runners, one job per target and GPU capability) -> promote
(registry-side, by digest). This module holds the values: the targets, the verify fan-out, the final
tags, the registries to log in to, where envbuild is installed from, whether the lock is sealed, and
the words every `envbuild` command of the pipeline repeats (-f SPEC, --matrix, --base-image), so a
workflow reproduces what the generator was told. Each generator's module only fills its template.
"""

from __future__ import annotations

from envbuild._util import toml
from envbuild._util.record import Record
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix, gpu_index
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.versions import sm_name
from envbuild.oci.reference import registry_host
from envbuild.render.plan import build_plan
from envbuild.resolve.platform_choice import target_platforms
from envbuild.resolve.query import parse_gpu
from envbuild.scaleout.bake import bake_names, platform_builds
from envbuild.scaleout.install import install_source
from envbuild.scaleout.quoting import shell_word
from envbuild.spec.lockfile import lock_path
from envbuild.spec.lockseal import KEY_ENV
from envbuild.spec.model import Spec
from envbuild.spec.validate import image_ref

DEFAULT_GPU_LABELS = ("self-hosted", "gpu")
# BuildKit's own attestations, asked of every candidate build by both generators (docker buildx
# build's shorthands for --attest type=sbom / type=provenance,mode=max; they need a docker-container
# builder or the containerd store: https://docs.docker.com/build/attestations/)
BUILDKIT_ATTESTATIONS = ("--sbom=true", "--provenance=mode=max")


class VerifyJob(Record):
    __slots__ = ("target", "gpu", "labels", "build", "platform")
    target: str
    gpu: str  # sm_XY, or "cpu" when the spec's smoke step runs on CPU
    labels: tuple[str, ...]  # the runner labels (GitHub) / tags (GitLab); () for CPU: any runner
    build: str  # the Build.key whose candidate it verifies
    platform: str


class Build(Record):
    """One image the build job makes: a target on one platform.

    key: names its candidate tag, cache and artifacts: the target's name, or <target>-<arch> for one
    platform of a target with several. context: its rendered context under render's -o directory
    (render.context.context_dir): <target>, or <target>/<arch>."""

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
        "install",
        "sealed",
        "staging",
        "staging_host",
        "promote_hosts",
        "targets",
        "verify_jobs",
        "promotions",
        "smoke",
        "builds",
        "platformed",
    )
    spec_path: str  # as the checkout names it
    spec_arg: str  # the word after -f in a script (shell-quoted)
    extra_args: str  # " --matrix M --base-image B" for lock --check and render, shell-quoted, or ""
    install: str  # the pip argument that installs envbuild (not yet quoted)
    sealed: bool  # the lock next to the spec carries a content-hmac: CI needs ENVBUILD_LOCK_KEY
    staging: str
    staging_host: str
    promote_hosts: tuple[str, ...]
    targets: tuple[str, ...]
    verify_jobs: tuple[VerifyJob, ...]
    promotions: tuple[tuple[str, tuple[str, ...]], ...]  # (target, final tags)
    smoke: object  # the spec's SmokeSpec
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
    extra = ""
    if matrix_path is not None:
        extra += f" --matrix {path_word(matrix_path)}"
    if base_image is not None:
        try:
            image_ref(base_image)
        except ValueError as exc:
            raise UsageError(
                f"--base-image {base_image!r} {exc}", fix="pass the image reference render and build use"
            ) from None
        extra += f" --base-image {shell_word(base_image)}"
    builds = tuple(
        Build(
            key=target.name + suffix,
            target=target.name,
            platform=platform or target_platforms(matrix, target.stack)[0],
            context=f"{target.name}/{suffix[1:]}" if platform else target.name,
        )
        for target in spec.targets
        for suffix, platform in platform_builds(matrix, target)
    )
    verify = []
    for build in builds:  # each platform's image is verified on its own, on a runner of its machine
        if spec.smoke.device == "gpu":
            for runner in gpu_runner_labels(matrix, spec, build.target, list(labels)):
                verify.append(
                    VerifyJob(
                        target=build.target,
                        gpu=runner[-1],
                        labels=tuple(runner),
                        build=build.key,
                        platform=build.platform,
                    )
                )
        else:  # the spec's smoke step runs on CPU: any runner of the platform will do
            verify.append(
                VerifyJob(target=build.target, gpu="cpu", labels=(), build=build.key, platform=build.platform)
            )
    promotions = tuple(
        (t.name, tuple(build_plan(matrix, spec, t, base_image=base_image).tags)) for t in spec.targets
    )
    return CiPlan(
        spec_path=spec_path,
        spec_arg=path_word(spec_path),
        extra_args=extra,
        install=install_source(install),
        sealed=lock_sealed(spec),
        staging=staging,
        staging_host=registry_host(staging),
        promote_hosts=tuple(dict.fromkeys([registry_host(staging), registry_host(spec.image.repository)])),
        targets=targets,
        verify_jobs=tuple(verify),
        promotions=promotions,
        smoke=spec.smoke,
        builds=builds,
        platformed=any(build.platform != DEFAULT_PLATFORM or build.key != build.target for build in builds),
    )


def gpu_runner_labels(matrix: Matrix, spec: Spec, target_name: str, gpu_labels: list[str]) -> list[list[str]]:
    """Runner label sets for verifying one target: one per distinct capability of its GPUs.

    A runner must carry every label of the set, so a target for H100 and L4 nodes is verified twice,
    on [self-hosted, gpu, sm_90] and on [self-hosted, gpu, sm_89]; a target naming no GPU on any runner
    with the base labels.
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


def path_word(path: str) -> str:
    """A path as one word of a script: `./` before one that starts with `-` (else an option)."""
    return shell_word(f"./{path}" if path.startswith("-") else path)


def lock_sealed(spec: Spec) -> bool:
    """Whether the lock next to the spec carries a content-hmac (`envbuild lock` with a key wrote it):
    then every job that reads it must have the key, or the HMAC goes unchecked. A missing or unreadable
    lock is not sealed; `lock --check` in the workflow reports it."""
    try:
        with open(lock_path(spec.path), encoding="utf-8") as handle:
            return "content-hmac" in toml.loads(handle.read())
    except (OSError, UnicodeDecodeError, toml.TOMLDecodeError):
        return False


LOCK_KEY_ENV = KEY_ENV
