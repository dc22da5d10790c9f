"""The nvidia/cuda image a `base-image` build starts from: the smallest flavor that still provides what
the build loads from it, and why.

NVIDIA publishes each release in flavors that add to one another (gitlab.com/nvidia/container-images/
cuda, dist/<release>/<os>/{base,runtime,runtime/cudnn}/Dockerfile): `base` installs the CUDA runtime
(cuda-cudart) and cuda-compat and sets NVIDIA_REQUIRE_CUDA and the driver's library paths; `runtime`
adds cuda-libraries (cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, NVRTC, nvJitLink, NPP, nvJPEG), NVTX
and NCCL; `cudnn-runtime` adds cuDNN. A framework that loads the image's libraries (TensorFlow without
[and-cuda], jax[cudaNN-local]) needs the cuDNN flavor. One that brings its own (torch and its nvidia-*
wheels, envbuild.resolve.needs.brings_own_libraries) loads none of them (envbuild.audit.loading), so
every library above `base` would be a second copy: about 2.8 GB for torch 2.6.0 cu124, the bytes of
the wheels' copies of those libraries in a real image (docs: the strategies table). `base` is kept
rather than a plain OS image because it is what the strategy promises: NVIDIA's own driver
requirement (NVIDIA_REQUIRE_CUDA with its brand clauses) and container toolkit settings.

A devel build keeps `<cudnn>-devel` for its build stage: that stage compiles the user's packages
(nvcc, the CUDA and cuDNN headers) and is not shipped, so its size costs a pull on the builder only.
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.cuda_tags import cuda_tag
from envbuild.matrix.model import Image as CudaImage

REPOSITORY = "nvidia/cuda"


class CudaBase(Record):
    """image: the final stage's FROM; build_image: the devel build stage's, or None; document: the
    stack JSON's `base_flavor` (the flavor, the image, the one it replaces, and why)."""

    __slots__ = ("image", "build_image", "document")
    image: str
    build_image: str | None
    document: dict


def _image(row: CudaImage, cudnn: str | None, kind: str, os_name: str) -> str:
    return f"{REPOSITORY}:{cuda_tag(row.cuda, cudnn, kind, os_name)}"


def cuda_base(row: CudaImage, os_name: str, *, own_libraries: bool, devel: bool, framework: str) -> CudaBase:
    """The flavor of the nvidia/cuda release `row` on `os_name` for a build that brings its own CUDA
    libraries (`own_libraries`) or loads the image's."""
    cudnn_runtime = _image(row, row.cudnn_tag, "runtime", os_name)
    build_image = _image(row, row.cudnn_tag, "devel", os_name) if devel else None
    if own_libraries:
        image = _image(row, None, "base", os_name)
        why = (
            f"{framework} installs its own CUDA libraries (its nvidia-* wheels) and loads those, not the "
            "image's: the base flavor (CUDA runtime, cuda-compat, NVIDIA_REQUIRE_CUDA) is the smallest "
            f"nvidia/cuda image; {row.cudnn_tag or 'cudnn'}-runtime would add copies of cuBLAS, cuFFT, "
            "cuRAND, cuSOLVER, cuSPARSE, NVRTC, nvJitLink, NCCL and cuDNN that it never loads"
        )
        flavor, instead_of = "base", cudnn_runtime
    else:
        image = cudnn_runtime
        why = (
            f"{framework} loads the image's cuDNN, NCCL and CUDA libraries (no nvidia-* wheels): the "
            f"{row.cudnn_tag or 'cudnn'}-runtime flavor is the smallest that has them"
        )
        flavor, instead_of = f"{row.cudnn_tag or 'cudnn'}-runtime", None
    if devel:
        why += f"; the devel build stage uses {build_image} (compilers and headers, not shipped)"
    document = {"flavor": flavor, "image": image, "instead_of": instead_of, "why": why}
    return CudaBase(image=image, build_image=build_image, document=document)
