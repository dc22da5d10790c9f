"""Which copy of the CUDA libraries a framework loads, as a fact of the CUDA strategy and the framework.

An image can hold two copies of cuBLAS, cuDNN or NCCL: an `nvidia/cuda` image's in /usr/local/cuda and
/usr/lib/<arch>-linux-gnu, and the `nvidia-*` wheels' in site-packages/nvidia/<library>/lib. Only one
is loaded, and which one is not a guess: each framework finds its wheels' copy in a way its own
source states (below). One function says it, so the stack JSON (plan.plan), the SBOM (attest.sbom)
and the audit's duplicate report (audit.duplicates) can never disagree.
"""

from __future__ import annotations

from envbuild._util.record import Record

WHEELS = "framework-wheels"  # the nvidia-* wheels in the framework's site-packages
IMAGE = "base-image"  # the nvidia/cuda image's own libraries
CONDA = "conda-env"  # the conda environment's cuda-* packages

WHEEL_PATH = "site-packages/nvidia/*/lib"
IMAGE_PATH = "/usr/local/cuda/lib64, /usr/lib/<arch>-linux-gnu"
CONDA_PATH = "$CONDA_PREFIX/lib"

# How each framework finds its nvidia-* wheels' libraries, and where that is written. Each one
# prefers the wheels' copy to anything LD_LIBRARY_PATH or the ld.so cache offers, so when both copies
# are present the wheels' is the one loaded.
WHEEL_LOADERS = {
    # read from torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl (PyPI): torch/__init__.py's
    # _load_global_deps loads torch/lib/libtorch_global_deps.so, whose DT_RPATH (readelf -d) is
    # $ORIGIN/../../nvidia/cublas/lib:...:$ORIGIN/../../nvidia/nccl/lib, and preloads nvrtc and nvJitLink
    # from site-packages/nvidia (pytorch/pytorch#138460); libtorch_cuda.so has the same DT_RPATH.
    # DT_RPATH (not DT_RUNPATH) is searched before LD_LIBRARY_PATH and /etc/ld.so.cache (ld.so(8)).
    "torch": (
        "torch finds them by torch/lib's DT_RPATH $ORIGIN/../../nvidia/<library>/lib "
        "(libtorch_global_deps.so, loaded first by torch/__init__.py's _load_global_deps, which also "
        "preloads the wheels' NVRTC and nvJitLink), which the dynamic loader searches before "
        "LD_LIBRARY_PATH and the ld.so cache"
    ),
    # https://github.com/jax-ml/jax/blob/main/jax_plugins/cuda/__init__.py: _load_nvidia_libraries
    # ("We prefer the Python packages, if present. If not, we fall back to loading them from
    # LD_LIBRARY_PATH") runs in initialize(), before the PJRT plugin loads
    "jax": (
        "the JAX CUDA plugin loads the nvidia-* packages' libraries first (jax_plugins/cuda/__init__.py, "
        "_load_nvidia_libraries) and falls back to LD_LIBRARY_PATH only without them"
    ),
    # https://github.com/openxla/xla/blob/main/xla/tsl/platform/default/cuda_build_defs.bzl:
    # cuda_rpath_flags, "rpath linker flags for use with nvidia wheel-packaged libs available from PyPI"
    "tensorflow": (
        "TensorFlow's CUDA build links with -rpath $ORIGIN/../nvidia/<library>/lib (XLA's "
        "cuda_rpath_flags), searched before LD_LIBRARY_PATH and the ld.so cache"
    ),
}


class LoadedCopy(Record):
    """source: WHEELS, IMAGE or CONDA; path: where that copy lies; why: the fact, with its source."""

    __slots__ = ("source", "path", "why")
    source: str
    path: str
    why: str

    def document(self) -> dict[str, str]:
        return {"loaded_from": self.source, "path": self.path, "why": self.why}


def loaded_copy(strategy: str, framework: str, own_libraries: bool) -> LoadedCopy:
    """The copy `framework` loads under `strategy`.

    own_libraries: the install brings the nvidia-* wheels (every `wheels` build; under `base-image`
    the builds that keep them, torch: envbuild.resolve.needs.brings_own_libraries)."""
    if strategy == "conda":
        return LoadedCopy(
            source=CONDA,
            path=CONDA_PATH,
            why="conda-forge's framework build links the environment's cuda-* packages (conda-build "
            "rewrites every RPATH to $ORIGIN-relative paths inside the environment); no other copy is "
            "installed",
        )
    loader = WHEEL_LOADERS.get(framework, "the framework's wheels name them")
    if strategy == "wheels":
        return LoadedCopy(
            source=WHEELS,
            path=WHEEL_PATH,
            why=f"the base is a plain OS image, so the nvidia-* wheels are the only copy; {loader}",
        )
    if own_libraries:
        return LoadedCopy(
            source=WHEELS,
            path=WHEEL_PATH,
            why=f"{loader}: a copy the nvidia/cuda image holds under /usr/local/cuda is not loaded",
        )
    return LoadedCopy(
        source=IMAGE,
        path=IMAGE_PATH,
        why="the install has no nvidia-* wheels (TensorFlow without [and-cuda], jax[cudaNN-local]), so "
        "the dynamic loader finds the nvidia/cuda image's libraries (its ld.so.conf.d entries)",
    )
