"""What a build's wheel METADATA needs (matrix/requirements.toml), applied to a candidate's plan, so
every plan resolve returns and render builds can install and import its framework.

* Wheels, open-ranged builds (JAX, TensorFlow >= 2.20): the stack's CUDA X.Y pins the nvidia-* wheels
  whose version follows it (envbuild.resolve.pins). Each pin must meet the package's own bound:
  - a runtime wheel (cudart, nvrtc, cupti, nvJitLink, cuBLAS) whose bound no X.Y.* release meets
    rules that X.Y out: the stack's `cuda` becomes the newest X.Y that installs (natively) or the
    lowest (--compat minor), which the driver must run like any other; none left, the candidate is
    rejected with the requirement as the reason.
  - a tool wheel (nvcc: ptxas and nvlink) may be newer than the runtime: JAX runs its ptxas on
    purpose (jax-cuda12-plugin >= 0.6 needs nvidia-cuda-nvcc-cu12>=12.6.85). Its pin becomes the
    package's own bound within the major, the stack lists it under `toolchain`, and a caveat says
    what a driver older than that ptxas costs: XLA disables parallel compilation
    (openxla/xla, xla/service/gpu/nvptx_compiler.cc).
* Base image: the nvidia/cuda image bundles its cuDNN, NCCL and CUDA runtime, and the framework must
  accept them. A range is met by containment; an exact version (the framework files' "9.1.0.70",
  METADATA's "==9.1.0.70") is the release the build was compiled with, met by it or a newer release
  of the same major (cuDNN and NCCL keep backward compatibility within a major; an older one fails
  at import). jax [cudaNN-local] and TensorFlow without [and-cuda] load the image's libraries. torch
  keeps its own nvidia-* wheels on a base image, which is then the release's `base` flavor (no cuDNN,
  no NCCL: envbuild.plan.cudabase), so only the image's CUDA X.Y is held to its bounds.

A build without a row was not measured: the framework file's own fields decide, as before, and a
caveat says so when the matrix has rows for other builds.
"""

from __future__ import annotations

from envbuild.matrix.bounds import admits_prefix, contains, exact
from envbuild.matrix.model import Image, Variant
from envbuild.matrix.requirements import Requirements
from envbuild.matrix.versions import format_minor

# The wheels whose version follows the CUDA X.Y they ship (12.6.77 is CUDA 12.6). Names as the
# frameworks' METADATA spells them (tests/integration/test_pins_metadata.py checks them against
# jax-cuda12-plugin's and tensorflow's Requires-Dist); CUDA 13 wheels dropped the -cuNN suffix.
CUDA_VERSIONED_WHEELS = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvcc",
    "nvidia-nvjitlink",
    "nvidia-cublas",
)
# compilers: their output runs on the runtime, so they may be newer than the stack's X.Y
TOOL_WHEELS = ("nvidia-cuda-nvcc",)
NOT_MEASURED = "requirements not read from METADATA for {build} (no row in requirements.toml): {what}"


def takes_cuda_wheels(variant: Variant, strategy: str | None) -> bool:
    """strategy None is resolve without --strategy: its install line is the wheels install."""
    return strategy in (None, "wheels") and variant.cuda_from == "wheels"


def wheel_name(base: str, major: int) -> str:
    """nvidia-cuda-runtime -> nvidia-cuda-runtime-cu12 (CUDA 13 wheels carry no suffix)."""
    return f"{base}-cu{major}" if major <= 12 else base


def library_name(base: str, major: int) -> str:
    """cuDNN and NCCL keep their -cuNN suffix in every major: nvidia-cudnn-cu13."""
    return f"{base}-cu{major}"


def runtime_miss(row: Requirements, cuda: tuple[int, int]) -> tuple[str, str] | None:
    """(name, bound) of the first runtime wheel whose bound no release of CUDA X.Y meets."""
    for base in CUDA_VERSIONED_WHEELS:
        if base in TOOL_WHEELS:
            continue
        name = wheel_name(base, cuda[0])
        bound = row.bounds.get(name)
        if bound is not None and not admits_prefix(bound, cuda):
            return name, bound
    return None


def toolchain(row: Requirements | None, cuda: tuple[int, int]) -> tuple[tuple[str, str], ...]:
    """(name, pin) of each tool wheel whose bound no X.Y.* release meets: its own bound, in the major."""
    if row is None:
        return ()
    found = []
    for base in TOOL_WHEELS:
        name = wheel_name(base, cuda[0])
        bound = row.bounds.get(name)
        if bound is not None and not admits_prefix(bound, cuda):
            found.append((name, f"{bound},<{cuda[0] + 1}"))
    return tuple(found)


def tool_outside_major(row: Requirements, major: int) -> tuple[str, str] | None:
    """A tool wheel whose bound no release of the major meets (the tool pin could not install)."""
    for base in TOOL_WHEELS:
        name = wheel_name(base, major)
        bound = row.bounds.get(name)
        if bound is not None and not admits_prefix(bound, (major,)):
            return name, bound
    return None


def toolchain_caveat(row: Requirements, cuda: tuple[int, int], pins: tuple[tuple[str, str], ...]) -> str:
    names = ", ".join(f"{name}{row.bounds[name]}" for name, _ in pins)
    return (
        f"{row.cited()} requires {names}: the CUDA {format_minor(cuda)} runtime runs kernels that a newer "
        f"ptxas compiles (pinned {', '.join(n + p for n, p in pins)}); on a driver older than that "
        f"ptxas, XLA disables parallel compilation, which slows compiling, not running"
    )


def _meets(bundled: str, wanted: str) -> bool:
    """Whether a bundled library version satisfies one declared range or exact build version."""
    version = exact(wanted) or (wanted if wanted[:1].isdigit() else None)
    if version is None:
        return contains(wanted, bundled)
    built = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    have = [int(p) for p in bundled.split(".")[:2] if p.isdigit()]
    if not built or not have:
        return False
    return have[0] == built[0] and have >= built


def brings_own_libraries(variant: Variant) -> bool:
    """A wheels build without an extra (torch) depends on its nvidia-* wheels itself, so its base-image
    install keeps them; builds with an extra (tensorflow[and-cuda], jax[cuda12]) drop it there and
    use the image's libraries (envbuild.plan.plan)."""
    return variant.cuda_from == "wheels" and not variant.extra


def _wanted_text(wanted: str) -> str:
    version = exact(wanted) or (wanted if wanted[:1].isdigit() else None)
    if version is None:
        return wanted
    return f"{version} or a newer {version.split('.')[0]}.x"


def image_miss(
    image: Image, variant: Variant, row: Requirements | None
) -> tuple[str, str, str | None] | None:
    """(library, what the build needs, what the image bundles) for the first bundled library the
    build does not accept, else None. Checks cuDNN and NCCL against the variant's fields and the
    row's bounds, and the image's CUDA X.Y against the row's runtime bound.

    A build that brings its own libraries (torch) is built on the release's `base` flavor
    (envbuild.plan.cudabase), which holds no cuDNN and no NCCL: nothing of the image can stand in
    for torch's copies, so only the CUDA X.Y is checked."""
    major = image.cuda[0]
    libraries = (
        ()
        if brings_own_libraries(variant)
        else (
            ("cuDNN", variant.cudnn, image.cudnn, "nvidia-cudnn"),
            ("NCCL", variant.nccl, image.nccl, "nvidia-nccl"),
        )
    )
    for label, field, bundled, base in libraries:
        declared = [d for d in (field, row.bounds.get(library_name(base, major)) if row else None) if d]
        for wanted in declared:
            if bundled is None or not _meets(bundled, wanted):
                return label, _wanted_text(wanted), bundled
    if row is not None:
        name = wheel_name("nvidia-cuda-runtime", major)
        bound = row.bounds.get(name)
        if bound is not None and not admits_prefix(bound, image.cuda[:2]):
            return "CUDA", f"{name}{bound}", format_minor(image.cuda[:2])
    return None


def image_miss_text(image: Image, miss: tuple[str, str, str | None]) -> str:
    """ "nvidia/cuda 12.6.3 bundles NCCL 2.23.4, but the build needs 2.26.2 or a newer 2.x"."""
    label, wanted, bundled = miss
    tag = ".".join(str(p) for p in image.cuda)
    if bundled is None:
        return f"nvidia/cuda {tag} records no {label} version in cuda.toml, and the build needs {wanted}"
    return f"nvidia/cuda {tag} bundles {label} {bundled}, but the build needs {wanted}"
