"""plan.strategy (issue 35 item 5): each CUDA strategy's decisions in one module. The goldens hold the
rendered bytes of every strategy; these tests hold the map from names to modules and the hooks that
differ, so a strategy added to the matrix without a module fails here, not in a build."""

from __future__ import annotations

from envbuild.matrix.model import STRATEGIES as NAMES
from envbuild.plan.strategy import STRATEGIES, strategy_for
from envbuild.plan.strategy.conda import MICROMAMBA_IMAGE


def test_every_strategy_the_matrix_and_spec_accept_has_a_module() -> None:
    assert set(STRATEGIES) == set(NAMES)
    assert all(strategy_for(name).name == name for name in NAMES)


def test_each_strategy_says_how_the_framework_is_installed() -> None:
    wheels, base, conda = (strategy_for(n) for n in ("wheels", "base-image", "conda"))
    assert base.framework_extra("jax", "cuda12-pip") == "cuda12-local"  # the image's CUDA
    assert base.framework_extra("tensorflow", "and-cuda") is None
    assert wheels.framework_extra("jax", "cuda12-pip") == "cuda12-pip"
    assert [s.installer("uv", True) for s in (wheels, base, conda)] == ["uv", "uv", "pip"]
    assert {s.installer("uv", False) for s in (wheels, base, conda)} == {"pip"}  # classic builder
    assert (wheels.devel(True), base.devel(True), conda.devel(True)) == (False, True, False)


def test_only_base_image_leaves_the_toolkit_variables_to_its_image() -> None:
    class Native:  # the two fields nvidia_env reads of a resolved stack
        mode, cuda = "native", (12, 4)

    class Minor:
        mode, cuda = "minor", (12, 8)

    assert strategy_for("base-image").nvidia_env(Native(), "12.4") == ()  # type: ignore[arg-type]
    for name in ("wheels", "conda"):
        env = dict(strategy_for(name).nvidia_env(Native(), "12.4"))  # type: ignore[arg-type]
        assert env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.4" and env["NVIDIA_VISIBLE_DEVICES"] == "all"
        minor = dict(strategy_for(name).nvidia_env(Minor(), "12.8"))  # type: ignore[arg-type]
        assert minor["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.0"  # minor compatibility: the major alone


def test_conda_starts_from_micromamba_and_wheels_from_the_os_image() -> None:
    class Row:
        image = "debian:12-slim"

    args = (None, None, Row(), "linux/amd64")
    assert strategy_for("wheels").base(*args, own_libraries=True, devel=False).image == "debian:12-slim"  # type: ignore[arg-type]
    assert strategy_for("conda").base(*args, own_libraries=False, devel=False).image == MICROMAMBA_IMAGE  # type: ignore[arg-type]


def test_what_the_later_stages_ask_agrees_with_the_hooks() -> None:
    """lock, render, ci and doctor read the strategy's attributes instead of its name: each must say
    what its hooks do, or a stage would act on a claim the plan does not keep."""

    class Native:
        mode, cuda = "native", (12, 4)

    for strategy in STRATEGIES.values():
        env = dict(strategy.nvidia_env(Native(), "12.4"))  # type: ignore[arg-type]
        assert strategy.sets_require_cuda == ("NVIDIA_REQUIRE_CUDA" in env), strategy.name

        class Stack:
            class framework:
                conda_packages = ("jaxlib", "jax")

            class release:
                version = "0.4.30"

            cuda = (12, 4)

        # a framework from conda packages is not a pip layer, and lives in a conda environment
        from_conda = bool(strategy.conda_framework(Stack()))  # type: ignore[arg-type]
        assert strategy.pip_framework is not from_conda and strategy.conda_environment is from_conda
    conda = strategy_for("conda")
    assert conda.image_uid == 57439 != strategy_for("wheels").image_uid  # micromamba's mambauser
    assert [s.name for s in STRATEGIES.values() if s.cuda_base_image] == ["base-image"]
