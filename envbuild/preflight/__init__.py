"""The preflight guard: what every image carries so that it refuses to start on a node it cannot run on.

The guard itself is `programs/envbuild_preflight.py`, a standard-library module installed into the
image's site-packages with a one-line .pth file that calls it at every Python start (its docstring
says why a .pth and what it reads). This package is the host's side: the files render writes
(`guard_files`), the facts document's shape (`facts_document`, filled by envbuild.plan from the
matrix), and the judge envbuild itself uses (`judge`), which is the guard's own.
"""

from __future__ import annotations

import os

from envbuild.preflight.programs.envbuild_preflight import (
    FACTS_FILE,
    FACTS_VERSION,
    MODE_VAR,
    MODES,
    PREFIX,
    ROOT_VAR,
    STOP_STATUS,
    VERDICT_VAR,
    format_facts,
    judge,
    message,
    parse_facts,
    summary,
)

__all__ = [
    "FACTS_FILE",
    "FACTS_NAME",
    "FACTS_VERSION",
    "GUARD_COMMAND",
    "MODES",
    "MODE_VAR",
    "MODULE_NAME",
    "PTH_NAME",
    "REFUSED",
    "ROOT_VAR",
    "STOP_STATUS",
    "VERDICT_VAR",
    "facts_document",
    "format_facts",
    "guard_files",
    "judge",
    "message",
    "parse_facts",
    "refusal",
    "smoke_environment",
    "summary",
]

PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "programs")
MODULE_NAME = "envbuild_preflight.py"
# "00-" sorts it before the other .pth files of site-packages, so the guard runs before their code too
PTH_NAME = "00-envbuild-preflight.pth"
PTH_TEXT = "import envbuild_preflight; envbuild_preflight.guard()\n"
FACTS_NAME = os.path.basename(FACTS_FILE)  # preflight.facts, in the context and in /opt/envbuild
# The guard as a command, for job logs: one line with the verdict, exit STOP_STATUS on a node that
# cannot run the image (Slurm's batch scripts and Kubernetes Jobs run it before the smoke step).
GUARD_COMMAND = ("python", "-m", "envbuild_preflight")
# how envbuild verify starts the error of a run the guard stopped (refusal); Slurm's verify job greps it
REFUSED = "the image's preflight guard refused this node: "


def smoke_environment(device: str, env: dict[str, str] | None) -> dict[str, str]:
    """The smoke step's environment: a CPU smoke step runs without a GPU on purpose, so the guard only
    warns there (a GPU host shows its /proc/driver/nvidia to every container, given GPUs or not); a
    GPU one keeps the image's strict default, so a node that cannot run the image fails as the user's
    job would. A value the caller sets wins."""
    base = {MODE_VAR: "warn"} if device == "cpu" else {}
    return {**base, **(env or {})}


def refusal(exit_code: int, stderr: str) -> tuple[str, str] | None:
    """(what, fix) when a run ended because the image's guard stopped it, else None: exit status
    STOP_STATUS and the guard's own lines on stderr (a program of the user's may exit 78 too)."""
    if exit_code != STOP_STATUS:
        return None
    lines = [line.strip() for line in stderr.splitlines()]
    if not any(line.startswith(PREFIX) for line in lines):
        return None
    problems = [line[len("problem: ") :] for line in lines if line.startswith("problem: ")]
    fixes = [line[len("fix: ") :] for line in lines if line.startswith("fix: ")]
    what = REFUSED + ("; ".join(problems) or "see its message")
    return what, "; ".join(fixes) or "run `python -m envbuild_preflight` in the image to see the verdict"


def guard_files(facts: dict) -> dict[str, bytes]:
    """The three files render puts into a build context: the module, its .pth and the facts."""
    with open(os.path.join(PROGRAMS_DIR, MODULE_NAME), "rb") as handle:
        module = handle.read()
    return {MODULE_NAME: module, PTH_NAME: PTH_TEXT.encode(), FACTS_NAME: facts_bytes(facts)}


def facts_bytes(facts: dict) -> bytes:
    """FACTS_FILE's bytes: the guard's own line format (format_facts), which it reads without json."""
    return format_facts(facts).encode()


def facts_document(
    *,
    stack: str,
    cuda: str,
    compat: str,
    min_driver: str,
    arch: str,
    platform: str,
    gpus: dict[str, list],
) -> dict:
    """The facts an image's guard judges by (FACTS_FILE). gpus: name key -> [name, compute capability,
    first driver branch or None, last driver branch or None], for every key a catalogue row answers to."""
    return {
        "version": FACTS_VERSION,
        "stack": stack,
        "cuda": cuda,
        "compat": compat,
        "min_driver": min_driver,
        "arch": arch,
        "platform": platform,
        "gpus": gpus,
    }
