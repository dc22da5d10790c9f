"""Container runtimes that run the smoke step: Docker, and the HPC runtimes of Slurm clusters.

Most training GPUs sit in Slurm clusters, where containers run through Apptainer, Enroot (pyxis) or
Charliecloud and no Docker daemon exists. `envbuild verify IMAGE --runtime NAME` runs the same smoke
program, judged by the same schema and gates (image.verify.judge_output), on any of them; the report
names the runtime and promotion reads it as it reads a Docker one.

Docker keeps its SDK path (image.verify.verify_image). Every other runtime is one small module with a
ContainerRuntime subclass that only says which command lines get, run and clean up an image
(runtime.base); runtime.driver runs them. Adding Podman or Singularity is one more module and one more
name here.
"""

from __future__ import annotations

import importlib

RUNTIMES = ("docker", "apptainer", "enroot", "charliecloud")
DEFAULT_RUNTIME = "docker"

_MODULES = {"apptainer": "apptainer", "enroot": "enroot", "charliecloud": "charliecloud"}


def runtime_named(name: str):  # -> envbuild.runtime.base.ContainerRuntime (imported lazily)
    """The command-line runtime called `name` (not docker: image.verify runs that one)."""
    if name not in _MODULES:
        raise ValueError(f"no command-line runtime {name!r}: one of {', '.join(_MODULES)}")
    module = importlib.import_module(f"envbuild.runtime.{_MODULES[name]}")
    return module.RUNTIME


def verify(name: str, image: str, **options):  # -> envbuild.image.verify.Verification
    """`envbuild verify IMAGE --runtime NAME`: the one entry point for every runtime; the options are
    image.verify.verify_image's (device, steps, precision, timeout, env, imports, command)."""
    if name == "docker":
        from envbuild.image.verify import verify_image

        return verify_image(image, **options)
    from envbuild.runtime.driver import verify_with

    return verify_with(runtime_named(name), image, **options)
