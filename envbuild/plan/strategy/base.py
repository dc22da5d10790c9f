"""The hooks a CUDA strategy fills, with what most strategies do."""

from __future__ import annotations

from typing import ClassVar

from envbuild._util.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix, OperatingSystem, Variant
    from envbuild.resolve.solver import Stack


class BaseChoice(Record):
    """The image a build starts from. runtime_image: the slimmer image a devel build's final stage
    starts from (None: one stage); flavor: the document of a chosen nvidia/cuda flavor (stack.json
    says which and why), None for a strategy that does not choose one."""

    __slots__ = ("image", "runtime_image", "flavor")
    image: str
    runtime_image: str | None
    flavor: dict | None


USER_UID = 10001  # above the 1000 that ubuntu:24.04's own "ubuntu" user already holds


class Strategy:
    """A CUDA strategy's decisions. The class attributes are what the stages after the plan (lock,
    render, ci, doctor) ask of a strategy, so none of them compares strategy names."""

    name: ClassVar[str]
    # the framework is a pip layer (requirements-framework.txt, locked by uv, its nvidia-* wheels in a
    # CUDA layer of their own); False: the framework is a conda package
    pip_framework: ClassVar[bool] = True
    # the image has a conda environment: the lock's conda layer, or an environment.yml micromamba
    # solves at build time when no conda layer is locked
    conda_environment: ClassVar[bool] = False
    image_uid: ClassVar[int] = USER_UID  # the non-root user the image runs as
    # the Python environment the framework is installed in (its site-packages holds the preflight guard)
    environment_prefix: ClassVar[str] = "/opt/venv"
    # the base is an nvidia/cuda image the matrix names: its tag can be advanced (eolfix), and what it
    # holds (cuDNN, NCCL) is what a framework without its own CUDA wheels loads
    cuda_base_image: ClassVar[bool] = False
    # the image sets NVIDIA_REQUIRE_CUDA itself (nvidia_env); False: its base image's own does
    sets_require_cuda: ClassVar[bool] = True

    def framework_extra(self, framework: str, extra: str | None) -> str | None:
        """The pip extra the framework is installed with (jax[cuda12], tensorflow[and-cuda])."""
        return extra

    def own_libraries(self, variant: Variant) -> bool:
        """True when the framework's own nvidia-* wheels carry CUDA in the image."""
        return False

    def devel(self, wanted: bool) -> bool:
        """Whether the build compiles against a devel image and ships a runtime one ([image] devel)."""
        return False

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
        raise NotImplementedError

    def conda_framework(self, stack: Stack) -> tuple[str, ...]:
        """The framework's conda match specs (none: the framework comes from pip)."""
        return ()

    def nvidia_env(self, stack: Stack, cuda: str) -> tuple[tuple[str, str], ...]:
        """The NVIDIA Container Toolkit's variables the image sets: every GPU, compute and utility,
        and the CUDA it needs (the major alone under minor-version compatibility)."""
        require = cuda if stack.mode == "native" else f"{stack.cuda[0]}.0"
        return (
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
            ("NVIDIA_REQUIRE_CUDA", f"cuda>={require}"),
        )

    def installer(self, wanted: str, buildkit: bool) -> str:
        """uv where it can stay out of the image, else pip. uv enters a build only through a RUN bind
        mount: the classic builder (the api backend) has none, and a COPYed uv would stay in a
        layer, so that backend installs with pip."""
        return wanted if buildkit else "pip"
