"""What a command-line container runtime is to envbuild: the command lines of one smoke run.

A runtime is data plus three pure methods, so every command line is tested exactly without the
binary installed, and runtime.driver alone runs processes, enforces the timeout and cleans up:

    fetch(run)   -> [Step, ...]   get the image by digest and unpack it under run.workdir
    execute(run) -> Step          run the smoke program in it, with or without GPUs
    cleanup(run) -> [Step, ...]   undo what fetch made outside run.workdir (the driver deletes that)

A SmokeRun carries everything a runtime may need to know about one run; nothing in it comes from the
user unchecked: the image is a parsed reference, the env keys are validated by the CLI or the spec.
"""

from __future__ import annotations

import os
from typing import ClassVar

from envbuild._util.record import Record

SMOKE_ENV_FILE = "smoke.env"  # run.path() of run.env as KEY=VALUE lines, written before execute
# run.path() of run.image_env as KEY=VALUE lines, written before fetch for a runtime that sets
# wants_image_env (Charliecloud puts it in the unpacked image as /ch/environment)
IMAGE_ENV_FILE = "image.env"


class SmokeRun(Record):
    """One smoke run of one image.

    image: the reference given (REPO@sha256:... for a registry image). image_id: its config digest.
    platform: the image's (linux/amd64), None when unknown. device: "cpu" or "gpu". argv: the smoke
    program's command line inside the container. env: variables to add for the program (on top of the
    image's own). user: the image's USER as "uid:gid" numbers, None when it names none or a name.
    workdir: a private scratch directory on the host that the driver deletes afterwards. local: the
    image is in the local Docker Engine (a name, not pulled by digest). image_env: the image's own ENV
    as its config records it ("KEY=VALUE", in order), for a runtime that must set it up itself.
    """

    __slots__ = (
        "image",
        "image_id",
        "platform",
        "device",
        "argv",
        "env",
        "user",
        "workdir",
        "local",
        "image_env",
    )
    image: str
    image_id: str
    platform: str | None
    device: str
    argv: tuple[str, ...]
    env: dict[str, str]
    user: str | None
    workdir: str
    local: bool
    image_env: tuple[str, ...]

    def path(self, name: str) -> str:
        """A path in the run's scratch directory."""
        return os.path.join(self.workdir, name)


class Step(Record):
    """One command: argv, what it does (for error messages: "pull the image"), and host environment
    variables the tool itself needs (USER for Charliecloud), or None for the caller's environment."""

    __slots__ = ("argv", "what", "env")
    argv: tuple[str, ...]
    what: str
    env: dict[str, str] | None


def step(what: str, *argv: str, env: dict[str, str] | None = None) -> Step:
    return Step(argv=tuple(argv), what=what, env=env)


class ContainerRuntime:
    """A runtime envbuild drives through its command line. Subclasses set the class attributes and
    override the three methods; none of them runs anything."""

    name: ClassVar[str]
    binary: ClassVar[str]  # what must be on PATH
    install_fix: ClassVar[str]  # how to get it, for the error when it is missing
    # what the runtime cannot do that Docker does, said in `verify`'s output and the docs
    limits: ClassVar[tuple[str, ...]] = ()
    # the command that prints its version (`envbuild doctor --runtime NAME` runs it): here, so this
    # module stays the one place that knows the runtime's command line
    version_argv: ClassVar[tuple[str, ...]] = ()
    # the oldest version `verify` works with, and why; None: any version does
    min_version: ClassVar[tuple[int, ...] | None] = None
    min_version_why: ClassVar[str] = ""
    # the driver writes IMAGE_ENV_FILE before fetch: the runtime's fetch steps put it in the image
    wants_image_env: ClassVar[bool] = False

    def version_step(self) -> Step:
        """The version command as a Step: a runtime whose tool needs host variables adds them."""
        return step("print its version", *self.version_argv)

    def fetch(self, run: SmokeRun) -> list[Step]:
        raise NotImplementedError

    def execute(self, run: SmokeRun) -> Step:
        raise NotImplementedError

    def cleanup(self, run: SmokeRun) -> list[Step]:
        return []

    def env_file(self, env: dict[str, str]) -> str:
        """The text of SMOKE_ENV_FILE, which the driver writes before execute: KEY=VALUE lines, read
        literally (Charliecloud). A runtime that reads the file otherwise (Apptainer: as shell
        assignments) overrides this to quote the values."""
        return env_lines(env)


def env_lines(env: dict[str, str]) -> str:
    """KEY=VALUE lines of an environment file (Charliecloud --set-env, Apptainer --env-file).

    Values never hold a newline: the CLI and the spec refuse them, and this refuses them again."""
    for key, value in env.items():
        if "\n" in key or "\n" in value or "=" in key:
            raise ValueError(f"environment variable {key!r} cannot go in an environment file")
    return "".join(f"{key}={value}\n" for key, value in sorted(env.items()))
