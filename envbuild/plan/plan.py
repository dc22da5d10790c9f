"""Turn one spec target into a build plan: the resolved stack plus every concrete choice a template
needs (base image, Python source, pip and conda requirements, labels, tags, environment).

Pure and deterministic: the same spec, matrix and options give the same plan, so rendering twice
gives identical bytes.
"""

from __future__ import annotations

import re

from envbuild import __version__
from envbuild._util.record import Record
from envbuild.audit.loading import loaded_copy
from envbuild.errors import LockError, NoStackError, UsageError
from envbuild.lockfile.model import LockedPackage, LockedTarget, requirement_lines
from envbuild.matrix.model import Image as CudaImage
from envbuild.matrix.model import Matrix, OperatingSystem
from envbuild.matrix.platforms import PLATFORMS
from envbuild.matrix.versions import format_driver, format_minor
from envbuild.oci import labels
from envbuild.oci.reference import parse_reference
from envbuild.plan.aptmirror import apt_mirror_command
from envbuild.plan.coherence import check_framework_pins
from envbuild.plan.cudalayer import is_cuda_package
from envbuild.plan.explicit import explicit_file
from envbuild.plan.preflight import image_facts
from envbuild.plan.strategy import strategy_for
from envbuild.plan.strategy.base import USER_UID, Strategy
from envbuild.resolve.needs import brings_own_libraries
from envbuild.resolve.pins import stack_pins
from envbuild.resolve.platform_choice import target_platforms
from envbuild.resolve.python_source import python_source as where_python_comes_from
from envbuild.resolve.report import stack_json
from envbuild.resolve.solver import Stack, candidate_label, resolve
from envbuild.resolve.spec_query import target_query
from envbuild.smoke import checks_file
from envbuild.spec import validate
from envbuild.spec.mirrors import Mirrors
from envbuild.spec.model import Spec, Target
from envbuild.spec.smokelabels import smoke_labels

PYPI = "https://pypi.org/simple"
CONDA_CHANNEL = "conda-forge"
VENV = Strategy.environment_prefix  # the wheels and base-image strategies' Python environment


class Plan(Record):
    __slots__ = (
        "target",
        "platform",
        "strategy",
        "stack",
        "os",
        "base_image",
        "runtime_image",
        "python",
        "python_source",
        "framework_requirements",
        "framework_index",
        "framework_find_links",
        "constraints",
        "conda_framework",
        "pip",
        "apt",
        "conda",
        "index_url",
        "extra_index_urls",
        "user",
        "uid",
        "env",
        "labels",
        "tags",
        "wheelhouse",
        "devel",
        "nvidia_env",
        "stack_document",
        "locked",
        "framework_lines",
        "user_lines",
        "buildkit",
        "installer",
        "cuda_lines",
        "conda_framework_lines",
        "conda_user_lines",
        "smoke_checks",
        "preflight",
        "environment",
        "mirrors",
    )
    target: str
    platform: str  # canonical (matrix.platforms): what the image is built, locked and verified for
    strategy: str
    stack: Stack
    os: OperatingSystem
    base_image: str  # FROM of the (first) stage
    runtime_image: str | None  # FROM of the final stage of a devel multi-stage build
    python: str
    python_source: str  # system | deadsnakes | conda
    framework_requirements: tuple[str, ...]
    framework_index: str
    framework_find_links: str | None
    constraints: tuple[str, ...]
    conda_framework: tuple[str, ...]  # conda match specs (strategy conda)
    pip: tuple[str, ...]
    apt: tuple[str, ...]
    conda: tuple[str, ...]
    index_url: str
    extra_index_urls: tuple[str, ...]
    user: str
    uid: int
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    tags: tuple[str, ...]
    wheelhouse: bool
    devel: bool
    nvidia_env: tuple[tuple[str, str], ...]  # set by envbuild where no nvidia/cuda base sets them
    stack_document: dict
    locked: bool  # installs are hash-checked from envbuild.lock (--require-hashes --no-deps)
    framework_lines: str  # requirements-framework.txt
    user_lines: str  # requirements.txt
    buildkit: bool  # the Dockerfile may use RUN --mount (else it renders for the classic builder)
    installer: str  # uv | pip: what the Dockerfile installs with (Strategy.installer)
    cuda_lines: str  # requirements-cuda.txt: the lock's CUDA wheels, their own layer ("" for none)
    # conda-framework.txt / conda-user.txt: the lock's conda layer as micromamba explicit files
    # (plan.explicit); "" when the lock has none, and then the conda strategy solves at build time
    conda_framework_lines: str
    conda_user_lines: str
    # smoke_checks.json: the spec's [smoke] imports and command, which the smoke program beside it runs
    # after the training step (smoke.checks_file); b"" when the spec has none, and then no file is copied
    smoke_checks: bytes
    # the preflight guard's facts (envbuild.plan.preflight), and the image's Python environment (its
    # prefix): the guard and the .pth file that runs it at every Python start go in its site-packages
    preflight: dict
    environment: str
    # the spec's [mirrors]: every source above is canonical (what the lock records, the labels and
    # stack.json say); the mirrored_* views are where lock, render and build fetch them from
    mirrors: Mirrors

    @property
    def site_packages(self) -> str:
        return f"{self.environment}/lib/python{self.python}/site-packages"

    # -- where the sources are fetched from: each through its mirror, when [mirrors] names one

    @property
    def apt_mirror(self) -> str:
        """The command that points the image's apt sources at [mirrors]' apt archives, run before the
        OS step's apt-get update ("" without one: the step renders as before, its cache kept)."""
        return apt_mirror_command(self.os.family, self.mirrors)

    @property
    def conda_channel(self) -> str:
        """The channel an unlocked conda build solves from: conda-forge, or its mirror's URL."""
        url = f"https://conda.anaconda.org/{CONDA_CHANNEL}"
        return self.mirrors.url(url) if self.mirrors.url_entry(url) else CONDA_CHANNEL

    @property
    def mirrored_base_image(self) -> str:
        return self.mirrors.image(self.base_image)

    @property
    def mirrored_runtime_image(self) -> str | None:
        return self.mirrors.image(self.runtime_image) if self.runtime_image else None

    @property
    def mirrored_framework_index(self) -> str:
        return self.mirrors.url(self.framework_index)

    @property
    def mirrored_find_links(self) -> str | None:
        return self.mirrors.url(self.framework_find_links) if self.framework_find_links else None

    @property
    def mirrored_index_url(self) -> str:
        return self.mirrors.url(self.index_url)

    @property
    def mirrored_extra_index_urls(self) -> tuple[str, ...]:
        return tuple(self.mirrors.url(url) for url in self.extra_index_urls)


def _resolve_target(
    matrix: Matrix, spec: Spec, target: Target, platform: str | None = None
) -> tuple[Stack, OperatingSystem, str]:
    stack = target.stack
    where = f"{spec.path} target {target.name!r}"
    query = target_query(matrix, stack, where, platform=platform)  # the query `resolve -f` explains
    os_row = matrix.oses[query.os or stack.os]
    result = resolve(matrix, query)
    if not result.stacks:
        misses = "; ".join(
            f"{candidate_label(r.framework, r.release, r.variant)}: {r.reason.text}"
            for r in result.closest[:3]
        )
        raise NoStackError(
            f"{where}: no {stack.strategy} stack fits [stack] "
            f"({'; '.join(result.problems) or misses or 'nothing matched'})",
            fix=f"run `envbuild resolve -f {spec.path} --target {target.name}` to see every rejection, "
            "then relax python, cuda, compat or the framework specifier",
        )
    return result.stacks[0], os_row, format_minor(result.stacks[0].python)


def _framework_install(
    stack: Stack, strategy: Strategy, spec_index: str | None
) -> tuple[tuple[str, ...], str, str | None]:
    """Requirements, index and find-links for the framework layer."""
    framework, release, variant = stack.framework, stack.release, stack.variant
    version = release.version
    extra = strategy.framework_extra(framework.name, variant.extra)
    name = framework.package + (f"[{extra}]" if extra else "")
    if framework.name == "torch" and release.pypi_variant != variant.name:
        # download.pytorch.org spells the variant as a local version: pin it, not just the release
        return (f"{name}=={version}+{variant.name}",), variant.index_url, None
    if "storage.googleapis.com" in variant.index_url:  # a find-links page, not an index
        return (f"{name}=={version}",), spec_index or PYPI, variant.index_url
    index = spec_index or (
        PYPI
        if variant.index_url.startswith("https://pypi.org/") or release.pypi_variant == variant.name
        else variant.index_url
    )
    return (f"{name}=={version}",), index, None


def _without_extras(requirement: str) -> str:
    """pip refuses extras in a constraints file: jax[cuda12]==0.6.2 -> jax==0.6.2."""
    return re.sub(r"\[[^\]]*\]", "", requirement)


def build_plan(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    *,
    base_image: str | None = None,
    wheelhouse: bool = False,
    lock: LockedTarget | None = None,
    buildkit: bool = True,
    platform: str | None = None,
) -> Plan:
    """The plan of `target` for `platform` (None: the lock's, else the target's first platform)."""
    strategy = target.stack.strategy
    platform = platform or (lock.platform if lock else target_platforms(matrix, target.stack)[0])
    stack, os_row, python = _resolve_target(matrix, spec, target, platform)
    if base_image is None:  # [site] base-image: the spec-level default of --base-image (a flag wins)
        base_image = spec.site.base_image
    if base_image is not None:
        try:
            validate.image_ref(base_image)
        except ValueError as exc:
            raise UsageError(f"--base-image {base_image!r} {exc}") from None
        # a mirror's name for the base is its canonical one: the lock records that (spec.mirrors)
        base_image = spec.mirrors.canonical_image(base_image)
    cuda = format_minor(stack.cuda)
    rules = strategy_for(strategy)
    requirements, index, find_links = _framework_install(stack, rules, spec.packages.index_url)
    index = spec.packages.framework_index_url or index  # a mirror of the variant's index
    where = f"{spec.path} target {target.name!r}"
    # the rule target_query already applied (so `resolve -f` refuses what render refuses): its answer
    python_source = where_python_comes_from(
        matrix,
        os_name=os_row.name,
        python=python,
        strategy=strategy,
        opt_in=target.stack.python_source,
        where=where,
    )
    check_framework_pins(spec, target, stack, where)

    devel = rules.devel(spec.image.devel)
    own_libraries = rules.own_libraries(stack.variant)
    chosen = rules.base(matrix, stack, os_row, platform, own_libraries=own_libraries, devel=devel)
    image, runtime_image, base_flavor = chosen.image, chosen.runtime_image, chosen.flavor
    if base_image is not None:  # an explicit override replaces every stage's base
        image = base_image
        if runtime_image is not None:
            runtime_image = base_image
        if base_flavor is not None:  # the strategy's choice, kept to say what was overridden
            base_flavor = {**base_flavor, "overridden_by": base_image}
    if lock is not None:  # the lock pins the base the spec, the matrix and --base-image name
        image = locked_base(
            lock,
            image,
            overridden=base_image is not None,
            where=f"{spec.path} target {target.name!r}",
            mirrors=spec.mirrors,
        )

    conda_framework = rules.conda_framework(stack)
    nvidia_env = rules.nvidia_env(stack, cuda)
    env = dict(spec.image.env)
    if stack.framework.name == "torch":
        env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

    fields = {
        "framework": stack.framework.name,
        "framework_version": stack.release.version,
        "cuda": cuda,
        "python": python,
        "target": target.name,
    }
    try:
        tags = tuple(f"{spec.image.repository}:{validate.expand_tag(t, fields)}" for t in spec.image.tags)
    except ValueError as exc:
        raise UsageError(f"{spec.path}: [image] tags: {exc}", fix="change the tag template") from None

    framework_packages, cuda_packages = split_cuda(lock, strategy)
    image_labels = _image_labels(
        spec,
        target,
        stack,
        strategy,
        image,
        python,
        matrix.image_for(stack.cuda, os_row.name, platform),
        platform,
    )
    document = stack_json(stack, strategy)
    document.update(
        {
            "target": target.name,
            "strategy": strategy,
            "os": os_row.name,
            "python": python,
            "base_image": image,
            "tags": list(tags),
            "spec_digest": spec.digest,
            "matrix_digest": matrix.digest,
            "envbuild": __version__,
            # which copy of the CUDA libraries the framework loads (audit.loading, with its sources),
            # and, for base-image, the nvidia/cuda flavor chosen and why (plan.cudabase)
            "cuda_libraries": loaded_copy(strategy, stack.framework.name, own_libraries).document(),
            "base_flavor": base_flavor,
        }
    )
    return Plan(
        target=target.name,
        platform=platform,
        strategy=strategy,
        stack=stack,
        os=os_row,
        base_image=image,
        runtime_image=runtime_image,
        python=python,
        python_source=python_source,
        framework_requirements=requirements,
        framework_index=index,
        framework_find_links=find_links,
        constraints=(*(_without_extras(r) for r in requirements), *stack_pins(stack, strategy)),
        conda_framework=conda_framework,
        pip=spec.packages.pip,
        apt=spec.packages.apt,
        conda=spec.packages.conda,
        index_url=spec.packages.index_url or PYPI,
        extra_index_urls=spec.packages.extra_index_urls,
        user=spec.image.user,
        uid=USER_UID,
        env=tuple(sorted(env.items())),
        labels=image_labels,
        tags=tags,
        wheelhouse=wheelhouse,
        devel=devel,
        nvidia_env=nvidia_env,
        stack_document=document,
        locked=lock is not None,
        framework_lines=requirement_lines(framework_packages, "framework")
        if lock
        else "".join(f"{r}\n" for r in requirements),
        user_lines=requirement_lines(lock.packages, "user")
        if lock
        else "".join(f"{r}\n" for r in spec.packages.pip),
        buildkit=buildkit,
        installer=rules.installer(spec.image.installer, buildkit),
        cuda_lines=requirement_lines(cuda_packages, "framework"),
        **_conda_lines(lock, platform, target.name, spec.mirrors),
        smoke_checks=checks_file(spec.smoke.imports, spec.smoke.command)
        if spec.smoke.imports or spec.smoke.command
        else b"",
        preflight=image_facts(matrix, stack, platform),
        environment=rules.environment_prefix,
        mirrors=spec.mirrors,
    )


def _conda_lines(lock: LockedTarget | None, platform: str, target: str, mirrors: Mirrors) -> dict[str, str]:
    """The lock's conda layer as the two explicit files, each package file fetched through its
    channel's mirror (its sha256 is checked all the same); a conda layer without its framework part
    cannot be installed in order, so it is refused rather than half used."""
    conda = tuple(p.replace(url=mirrors.url(p.url)) for p in lock.conda) if lock is not None else ()
    subdir = PLATFORMS[platform].conda_subdir
    lines = {
        f"conda_{layer}_lines": explicit_file(conda, layer, target=target, subdir=subdir)
        for layer in ("framework", "user")
    }
    if conda and not lines["conda_framework_lines"]:
        raise LockError(
            f"envbuild.lock target {target!r}: the conda layer has user packages but no framework layer",
            fix="run `envbuild lock` and commit envbuild.lock",
        )
    return lines


def split_cuda(
    lock: LockedTarget | None, strategy: str
) -> tuple[tuple[LockedPackage, ...], tuple[LockedPackage, ...]]:
    """(the lock's packages without the framework layer's CUDA wheels, those CUDA wheels).

    The CUDA wheels get a layer of their own before the framework's (envbuild.plan.cudalayer);
    conda installs CUDA from conda packages, so its lock is left whole."""
    if lock is None:
        return (), ()
    if not strategy_for(strategy).pip_framework:  # conda's CUDA is conda packages
        return lock.packages, ()
    cuda = tuple(p for p in lock.packages if p.layer == "framework" and is_cuda_package(p.name))
    return tuple(p for p in lock.packages if p not in cuda), cuda


def locked_base(
    lock: LockedTarget, image: str, *, overridden: bool, where: str, mirrors: Mirrors | None = None
) -> str:
    """The lock's digest-pinned base, when it pins the repository the plan names, in its canonical
    name (a lock made before [mirrors], with --base-image naming the mirror, pins the mirror's name:
    `mirrors` maps it back, so adding the mirror to the spec is all such a lock needs).

    A lock is reviewed text: a base of another repository is a forgery or a lock made with a
    different --base-image, and either way not what this build was asked for."""
    base = mirrors.canonical_image(lock.base_image) if mirrors else lock.base_image
    locked, named = parse_reference(base), parse_reference(image)
    same_repository = (locked.api_host, locked.repository) == (named.api_host, named.repository)
    # the tag is what the spec, matrix or --base-image name (a digest-only reference has none to
    # compare); only the digest is the lock's own
    names_a_tag = not (named.digest and image.strip() == f"{named.name}@{named.digest}")
    same_tag = locked.tag == named.tag or not names_a_tag
    if not same_repository or not same_tag or (named.digest and named.digest != locked.digest):
        hint = (
            ""
            if overridden
            else f"; if {locked.name} is your mirror of {named.name}, say so in [mirrors] "
            f'("{named.name}" = "{locked.name}")'
        )
        raise LockError(
            f"{where}: envbuild.lock pins the base image {lock.base_image}, but the spec, the matrix, "
            f"[site] base-image and --base-image give {image}{hint}",
            fix="map the mirror in the spec's [mirrors], or run `envbuild lock` with the base you build "
            "on (--base-image or [site] base-image) and commit envbuild.lock",
        )
    return base  # a devel build's runtime stage keeps its tag


def _image_labels(
    spec: Spec,
    target: Target,
    stack: Stack,
    strategy: str,
    image: str,
    python: str,
    cuda_image: CudaImage | None,
    platform: str,
) -> tuple[tuple[str, str], ...]:
    variant = stack.variant
    cudnn, nccl = variant.cudnn or "", variant.nccl or ""
    image_libraries = cuda_image is not None and not brings_own_libraries(variant)
    if strategy_for(strategy).cuda_base_image and image_libraries:
        # TensorFlow without [and-cuda] and jax[cudaNN-local] load the image's libraries: the labels
        # say what the image holds, not the range the framework's wheels would have accepted
        cudnn, nccl = cuda_image.cudnn or cudnn, cuda_image.nccl or nccl
    description = (
        f"{stack.framework.display_name} {stack.release.version} with CUDA {format_minor(stack.cuda)}, "
        f"Python {python}, built by envbuild"
    )
    written = {
        "org.opencontainers.image.title": f"{spec.image.repository} ({target.name})",
        "org.opencontainers.image.description": description,
        "org.opencontainers.image.version": stack.release.version,
        "org.opencontainers.image.base.name": image,
        labels.VERSION: __version__,
        labels.TARGET: target.name,
        labels.STRATEGY: strategy,
        labels.FRAMEWORK: stack.framework.name,
        labels.FRAMEWORK_VERSION: stack.release.version,
        labels.VARIANT: variant.name,
        labels.CUDA: format_minor(stack.cuda),
        labels.CUDNN: cudnn,
        labels.NCCL: nccl,
        labels.PYTHON: python,
        labels.MIN_DRIVER: format_driver(stack.min_driver),
        labels.COMPAT: stack.mode,
        labels.GPU_ARCH: variant.arch_for(platform).describe(),  # this image's platform's kernels
        labels.SPEC_DIGEST: f"sha256:{spec.digest}",
        labels.PLATFORM: platform,
        **smoke_labels(spec.smoke),  # what `envbuild verify IMAGE` smokes it with, away from the spec
    }
    written.update(dict(spec.image.labels))
    return tuple(sorted((key, value) for key, value in written.items() if value))
