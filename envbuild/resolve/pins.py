"""The nvidia-* pins that make an install get the stack resolve reported: one place for the text and
JSON install lines (envbuild.resolve.report) and render's constraints.txt (envbuild.plan.plan),
so what resolve says is what pip, uv and the lock get.

* Open-ranged builds (JAX, TensorFlow >= 2.20: any CUDA X.Y >= a minimum) take the newest nvidia-*
  wheels of the major; without a pin pip installs 12.9 on a driver that runs 12.6 natively. The wheels
  whose version follows the CUDA X.Y they ship (12.6.77 is CUDA 12.6) are pinned to the stack's X.Y.
* A stack whose cuDNN range had to be narrowed for a GPU (Stack.cudnn_pin) pins nvidia-cudnn-cuNN.
* Each pin stays inside the package's own METADATA bound (envbuild.resolve.needs): the solver only
  returns X.Y that every runtime wheel's bound admits, and a tool wheel (nvcc) whose bound no X.Y.*
  release meets is pinned to that bound within the major instead (Stack.toolchain).

Only installs that take the CUDA wheels get pins: base-image uses the image's CUDA and cuDNN, conda
its own packages, and builds with cuda_from = "system" install no nvidia-* wheels.
"""

from __future__ import annotations

from envbuild.resolve.needs import CUDA_VERSIONED_WHEELS, wheel_name
from envbuild.resolve.needs import takes_cuda_wheels as _takes
from envbuild.resolve.solver import Stack

__all__ = ["CUDA_VERSIONED_WHEELS", "stack_pins", "takes_cuda_wheels"]


def takes_cuda_wheels(stack: Stack, strategy: str | None) -> bool:
    """strategy None is resolve without --strategy: its install line is the wheels install."""
    return _takes(stack.variant, strategy)


def stack_pins(stack: Stack, strategy: str | None) -> tuple[str, ...]:
    """`nvidia-*==X.Y.*` requirements, in a fixed order, that hold the install to the stack."""
    if not takes_cuda_wheels(stack, strategy):
        return ()
    major, minor = stack.cuda
    pins: list[str] = []
    if stack.variant.cuda is None:
        # a tool wheel whose own bound no X.Y.* release meets keeps that bound (Stack.toolchain)
        tools = dict(stack.toolchain)
        for base in CUDA_VERSIONED_WHEELS:
            name = wheel_name(base, major)
            pins.append(f"{name}{tools.get(name, f'=={major}.{minor}.*')}")
    if stack.cudnn_pin is not None:
        pins.append(f"nvidia-cudnn-cu{major}=={stack.cudnn_pin[0]}.{stack.cudnn_pin[1]}.*")
    return tuple(pins)
