"""Smoke programs: what runs inside built images, and the host-side code that ships and reads them.

The programs live in `programs/` and use only the standard library and their framework: a framework's
`<framework>_smoke.py` becomes smoke.py, and the code the three share, `smoke_common.py`, goes beside
it under its own name. `program_files()` gives both, read unchanged from this package.

The smoke defaults (steps, precision, timeout), the precisions and the rule for the precision a run
trains in (`effective_precision`, which the CI verify jobs follow too) are defined once, in smoke_common.py,
and exported from here for the rest of envbuild; so are the rules of the user's own checks ([smoke]
imports and command), which the spec applies when it reads them and the program again when it runs them.

An image whose spec has checks carries them as CHECKS_FILE beside the program (`checks_file`), so every
way a smoke step runs (verify on any runtime, a Kubernetes Job, a pyxis job, Apptainer's %test) runs
them without being told; `smoke_command(..., imports=, command=)` replaces them for one run.
"""

from __future__ import annotations

import json
import os

from envbuild.smoke.programs.smoke_common import (
    CHECKS_FILE,
    DEFAULT_PRECISION,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT_S,
    MAX_COMMAND_CHARS,
    MAX_IMPORTS,
    PRECISIONS,
    command_problem,
    effective_precision,
    module_problem,
)

__all__ = [
    "CHECKS_FILE",
    "COMMON_FILE",
    "DEFAULT_PRECISION",
    "DEFAULT_STEPS",
    "DEFAULT_TIMEOUT_S",
    "DEVICES",
    "FRAMEWORKS",
    "IMAGE_PROGRAM",
    "MAX_COMMAND_CHARS",
    "MAX_IMPORTS",
    "PRECISIONS",
    "PROGRAMS_DIR",
    "STEPS_RANGE",
    "TIMEOUT_RANGE_S",
    "checks_file",
    "command_problem",
    "effective_precision",
    "module_problem",
    "program_files",
    "smoke_command",
]

FRAMEWORKS = ("torch", "tensorflow", "jax")
DEVICES = ("gpu", "cpu")  # what a smoke step runs on (the programs also take "auto", for a host)
# What a smoke step's steps and timeout may be: the --steps/--timeout of `verify` and `smoke` take the
# ranges the spec's [smoke] table does (spec/model.py). Fewer than one step trains nothing; a timeout under
# 10 s cannot even import a framework.
STEPS_RANGE = (1, 10_000)
TIMEOUT_RANGE_S = (10, 86_400)
PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "programs")
COMMON_FILE = "smoke_common.py"  # the shared module, imported by name from the program beside it
# where every image carries its smoke program (the Dockerfile templates copy program_files() there):
# what verify, the runtimes, Kubernetes Jobs, pyxis jobs and Apptainer's %test all run
IMAGE_PROGRAM = "/opt/envbuild/smoke.py"


def _read(name: str) -> bytes:
    with open(os.path.join(PROGRAMS_DIR, name), "rb") as handle:
        return handle.read()


def smoke_command(
    device: str,
    steps: int,
    precision: str,
    *,
    imports: tuple[str, ...] | None = None,
    command: str | None = None,
) -> tuple[str, ...]:
    """The smoke step's command line inside an image: one definition for every way envbuild runs it.

    imports / command: the checks to run after the training step instead of the image's own (None: the
    image's CHECKS_FILE, if it has one). An argv, never a shell line: the command is one word of it.
    """
    argv = ("python", IMAGE_PROGRAM, "--device", device, "--steps", str(steps), "--precision", precision)
    for name in imports or ():
        argv += ("--import", name)
    if command is not None:
        argv += ("--command=" + command,)  # one word, even for a command that begins with "-"
    return argv


def checks_file(imports: tuple[str, ...], command: str | None) -> bytes:
    """CHECKS_FILE's bytes for an image with these checks ([smoke] imports and command, validated)."""
    document = {"imports": list(imports), "command": command}
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def program_files(framework: str) -> dict[str, bytes]:
    """The files a framework's smoke program runs from, by their names in one directory:
    smoke.py (the program) and smoke_common.py (the code it imports)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"no smoke program for {framework!r}: one of {', '.join(FRAMEWORKS)}")
    return {"smoke.py": _read(f"{framework}_smoke.py"), COMMON_FILE: _read(COMMON_FILE)}
