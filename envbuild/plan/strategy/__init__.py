"""The three CUDA strategies, one module each: what each decides about a plan, readable in one place.

- wheels (`wheels.py`): a plain OS image; CUDA comes from the framework's nvidia-* wheels.
- base-image (`baseimage.py`): NVIDIA's nvidia/cuda image carries CUDA (and cuDNN); the framework
  uses it where it can (TensorFlow without its CUDA extra, jax[cudaXY-local]).
- conda (`conda.py`): micromamba's image; the framework and CUDA come from conda packages.

build_plan asks `strategy_for(name)` and calls its hooks; the defaults in `base.Strategy` are what
most strategies do, and each subclass overrides only where it differs.
"""

from __future__ import annotations

from envbuild.plan.strategy.base import Strategy
from envbuild.plan.strategy.baseimage import BaseImageStrategy
from envbuild.plan.strategy.conda import CondaStrategy
from envbuild.plan.strategy.wheels import WheelsStrategy

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (WheelsStrategy(), BaseImageStrategy(), CondaStrategy())
}


def strategy_for(name: str) -> Strategy:
    """The strategy of a spec's `[stack] strategy` (the spec loader has checked the name)."""
    return STRATEGIES[name]
