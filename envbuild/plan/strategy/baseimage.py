"""base-image: NVIDIA's nvidia/cuda image carries CUDA, and the framework uses it where it can."""

from __future__ import annotations

import re

from envbuild._util.record import TYPE_CHECKING
from envbuild.plan.cudabase import cuda_base
from envbuild.plan.strategy.base import BaseChoice, Strategy
from envbuild.resolve.needs import brings_own_libraries

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix, OperatingSystem, Variant
    from envbuild.resolve.solver import Stack


class BaseImageStrategy(Strategy):
    name = "base-image"
    sets_require_cuda = False  # nvidia/cuda images set it, with brand clauses (nvidia_env)
    cuda_base_image = True

    def framework_extra(self, framework: str, extra: str | None) -> str | None:
        if framework == "tensorflow":
            return None  # use the image's CUDA and cuDNN
        if framework == "jax" and extra:
            return re.sub(r"[-_]pip$", "", extra) + "-local"  # jax[cuda12-local]: the image's CUDA
        return extra

    def own_libraries(self, variant: Variant) -> bool:
        return brings_own_libraries(variant)  # torch keeps its nvidia-* wheels on a base image

    def devel(self, wanted: bool) -> bool:
        return wanted

    def base(
        self,
        matrix: Matrix,
        stack: Stack,
        os_row: OperatingSystem,
        platform: str,
        *,
        own_libraries: bool,
        devel: bool,
    ) -> BaseChoice:
        row = matrix.image_for(stack.cuda, os_row.name, platform)
        assert row is not None  # the resolver only returns stacks that have one
        chosen = cuda_base(
            row, os_row.name, own_libraries=own_libraries, devel=devel, framework=stack.framework.display_name
        )
        return BaseChoice(
            image=chosen.build_image or chosen.image,
            runtime_image=chosen.image if devel else None,
            flavor=chosen.document,
        )

    def nvidia_env(self, stack: Stack, cuda: str) -> tuple[tuple[str, str], ...]:
        return ()  # nvidia/cuda images set these themselves, with brand clauses
