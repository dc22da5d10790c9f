"""wheels: a plain OS image, and CUDA from the framework's nvidia-* wheels."""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.plan.strategy.base import BaseChoice, Strategy

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix, OperatingSystem, Variant
    from envbuild.resolve.solver import Stack


class WheelsStrategy(Strategy):
    name = "wheels"

    def own_libraries(self, variant: Variant) -> bool:
        return True  # every wheels build has them

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
        return BaseChoice(image=os_row.image, runtime_image=None, flavor=None)
