"""conda: micromamba's image, and the framework and CUDA from conda packages."""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.plan.strategy.base import BaseChoice, Strategy

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix, OperatingSystem
    from envbuild.resolve.solver import Stack

MICROMAMBA_IMAGE = "mambaorg/micromamba:2.6.1"
MICROMAMBA_UID = 57439  # mambauser in mambaorg/micromamba images (MAMBA_USER_ID)


class CondaStrategy(Strategy):
    name = "conda"
    pip_framework = False  # conda-forge installs the framework; its solve is the lock's conda layer
    conda_environment = True
    image_uid = MICROMAMBA_UID
    environment_prefix = "/opt/conda"  # micromamba's base environment (MAMBA_ROOT_PREFIX)

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
        return BaseChoice(image=MICROMAMBA_IMAGE, runtime_image=None, flavor=None)

    def conda_framework(self, stack: Stack) -> tuple[str, ...]:
        names, version = stack.framework.conda_packages, stack.release.version
        # the package carrying the GPU build gets a build string of the CUDA major (cuda12* matches
        # conda-forge's cuda126_..., cuda129_... builds); the others just the version
        return (*(f"{n}={version}" for n in names[:-1]), f"{names[-1]}={version}=cuda{stack.cuda[0]}*")

    def installer(self, wanted: str, buildkit: bool) -> str:
        return "pip"  # its pip layer installs into micromamba's environment, which keeps pip as well
