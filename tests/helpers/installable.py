"""The installability gate: what a rendered image installs, resolved by uv from metadata alone.

A rendered context's Dockerfile says what the image installs: each `uv pip install` / `pip install`
RUN line names its index URLs, its `-r` requirement files and its `-c` constraint files (copied to
/opt/envbuild/). `install_case` reads those lines back, so the gate checks the exact inputs docker
build would use, not a second opinion of what the plan meant. `resolve_case` asks uv for a real
resolution of them, for the image's Python on manylinux_2_28 x86_64, against loopback indexes that
stand in for the upstream ones (tests/helpers/metaindex.py serves recorded METADATA through PEP 658).

Why resolve all layers together: the user layer runs `uv pip install` into the venv the framework
layer filled, and neither uv nor pip re-checks the framework's own requirements there, so a user pin
that breaks the framework would install silently. One resolution of every layer's requirements under
the constraints proves the finished environment is consistent.

When uv finds no solution, `conflicting_lines` names the culprit: each constraint line (then each
user requirement line) is dropped in turn, and the ones whose removal lets the install resolve are the
pins that conflict. uv's own explanation is kept beside them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

PLATFORM = "x86_64-manylinux_2_28"  # glibc 2.28: a floor every base envbuild renders on meets or exceeds
CONTEXT_DIR = "/opt/envbuild/"  # where the Dockerfile copies the install inputs
UV_TIMEOUT_S = 120  # one resolution against loopback takes well under a second; this is a hang guard

# The flags the install lines may carry. Anything else makes `install_case` fail, so a new install
# shape (find-links, a wheelhouse, --no-index) is noticed by the gate instead of silently ignored.
_VALUE_FLAGS = {"--python", "--link-mode"}
_PLAIN_FLAGS = {"--no-cache", "--no-cache-dir", "--compile-bytecode", "--quiet", "-q"}


@dataclass(frozen=True)
class Layer:
    """One install RUN line."""

    indexes: tuple[str, ...]  # --index-url first, then each --extra-index-url
    requirements: tuple[str, ...]  # -r files, by name in the context
    constraints: tuple[str, ...]  # -c files, by name in the context


@dataclass(frozen=True)
class InstallCase:
    """What one rendered context installs, read from its Dockerfile."""

    name: str  # "golden/wheels-jax", "example/torch-wheels"
    context: Path
    python: str  # the image's Python X.Y (its io.envbuild.python label)
    layers: tuple[Layer, ...]

    def lines(self, name: str) -> list[str]:
        """The requirement lines of one input file (comments and blanks dropped)."""
        lines = (self.context / name).read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]

    @property
    def indexes(self) -> tuple[str, ...]:
        """Every upstream index any layer reads, in order of first use."""
        return tuple(dict.fromkeys(url for layer in self.layers for url in layer.indexes))


def _instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions with continuation lines joined."""
    joined, current = [], ""
    for line in dockerfile.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            joined.append(current.strip())
            current = ""
    if current:
        joined.append(current.strip())
    return joined


def _layer(command: str, where: str) -> Layer:
    words = shlex.split(command)
    at = next(i for i in range(1, len(words)) if words[i - 1 : i + 1] == ["pip", "install"])
    words = words[at + 1 :]
    indexes: list[str] = []
    extra: list[str] = []
    requirements: list[str] = []
    constraints: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        flag, eq, inline = word.partition("=")
        value_flags = {"--index-url", "--extra-index-url", "-r", "-c", *_VALUE_FLAGS}
        if flag in value_flags:
            value = inline if eq else words[i + 1]
            i += 1 if eq else 2
            if flag == "--index-url":
                indexes.append(value)
            elif flag == "--extra-index-url":
                extra.append(value)
            elif flag in ("-r", "-c"):
                if not value.startswith(CONTEXT_DIR):
                    raise ValueError(f"{where}: {flag} {value} is not an input copied to {CONTEXT_DIR}")
                (requirements if flag == "-r" else constraints).append(value[len(CONTEXT_DIR) :])
            continue
        if word in _PLAIN_FLAGS:
            i += 1
            continue
        raise ValueError(
            f"{where}: the install line has {word!r}, which the installability gate does not read"
        )
    if len(indexes) != 1:
        raise ValueError(f"{where}: an install line needs exactly one --index-url, it has {len(indexes)}")
    return Layer(tuple(indexes + extra), tuple(requirements), tuple(constraints))


def install_case(name: str, context: Path) -> InstallCase:
    """Read the install layers and the Python of the rendered context at `context`."""
    dockerfile = (context / "Dockerfile").read_text()
    python = re.search(r'"io\.envbuild\.python"="(\d+\.\d+)"', dockerfile)
    if python is None:
        raise ValueError(f"{name}: the Dockerfile has no io.envbuild.python label")
    layers = tuple(
        _layer(instruction[len("RUN ") :], f"{name}/Dockerfile")
        for instruction in _instructions(dockerfile)
        if instruction.startswith("RUN ") and re.search(r"\bpip install\b", instruction)
    )
    return InstallCase(name, context, python.group(1), layers)


def cuda_family(name: str) -> bool:
    """A CUDA-family distribution: the ones envbuild pins and frameworks bound (nvidia-*, cuda-*,
    tensorrt*)."""
    name = canonicalize_name(name)
    return name.startswith(("nvidia-", "cuda-", "tensorrt"))


@dataclass(frozen=True)
class Resolution:
    ok: bool
    pins: dict[str, str]  # canonical name -> version, when ok
    explanation: str  # uv's stderr, when not ok


def uv_env() -> dict[str, str]:
    """This environment without UV_* and PIP_* settings: a developer's uv.toml, index or find-links
    must not reach the gate (it runs with --no-config too)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}


def compile_requirements(
    uv: str,
    workdir: Path,
    *,
    python: str,
    requirements: list[str],
    constraints: list[str],
    indexes: tuple[str, ...],
) -> Resolution:
    """`uv pip compile` of these requirement and constraint lines against `indexes` (the first as
    --index-url), binaries only, for CPython `python` on manylinux_2_28 x86_64."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "requirements.in"
    source.write_text("".join(f"{line}\n" for line in requirements))
    pinned = workdir / "constraints.in"
    pinned.write_text("".join(f"{line}\n" for line in constraints))
    command = [
        uv, "pip", "compile", str(source), "-c", str(pinned),
        "--no-config", "--cache-dir", str(workdir.parent / "uv-cache"),
        "--python-version", python, "--python-platform", PLATFORM,
        "--no-build", "--no-python-downloads",
        "--python", sys.executable,  # skips the interpreter search; nothing is built with it
        "--index-url", indexes[0], *(f"--extra-index-url={url}" for url in indexes[1:]),
        "--no-header", "--no-annotate", "--quiet",
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=UV_TIMEOUT_S, env=uv_env(), check=False
    )
    if done.returncode != 0:
        return Resolution(False, {}, done.stderr.strip())
    pins = {}
    for line in done.stdout.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.split(";", 1)[0].strip()
    return Resolution(True, pins, "")


@dataclass(frozen=True)
class CaseInputs:
    """The lines one resolution of a case (or of one of its layers) takes."""

    requirements: list[tuple[str, str]]  # (file, line)
    constraints: list[tuple[str, str]]
    indexes: tuple[str, ...]


def case_inputs(case: InstallCase, layers: tuple[Layer, ...] | None = None) -> CaseInputs:
    """The requirement and constraint lines of `layers` (all of the case's by default), each once."""
    layers = case.layers if layers is None else layers
    requirements = [
        (f, line) for layer in layers for f in dict.fromkeys(layer.requirements) for line in case.lines(f)
    ]
    files = dict.fromkeys(f for layer in layers for f in layer.constraints)
    constraints = [(f, line) for f in files for line in case.lines(f)]
    indexes = tuple(dict.fromkeys(url for layer in layers for url in layer.indexes))
    return CaseInputs(list(dict.fromkeys(requirements)), constraints, indexes)


def conflicting_lines(
    uv: str,
    workdir: Path,
    python: str,
    inputs: CaseInputs,
    indexes: tuple[str, ...],
    framework_file: str,
    explanation: str,
) -> list[str]:
    """The pins whose removal alone lets the install resolve: each constraint line, then each
    requirement line outside the framework's own file (dropping the framework requirement would
    "resolve" anything, and names nothing useful). Lines naming a project uv's `explanation`
    mentions are tried first, and alone when one of them is the answer: a run costs a resolution."""
    candidates = [("c", item) for item in inputs.constraints] + [
        ("r", item) for item in inputs.requirements if item[0] != framework_file
    ]
    mentioned = [c for c in candidates if (requirement_name(c[1][1]) or "\0") in canonical_words(explanation)]
    found = _dropping_each(uv, workdir, python, inputs, indexes, mentioned)
    rest = [c for c in candidates if c not in mentioned]
    return found or _dropping_each(uv, workdir / "rest", python, inputs, indexes, rest)


def canonical_words(text: str) -> set[str]:
    """Every project-name-like word of `text`, canonicalized (uv writes names as given)."""
    return {canonicalize_name(word) for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)}


def _dropping_each(
    uv: str,
    workdir: Path,
    python: str,
    inputs: CaseInputs,
    indexes: tuple[str, ...],
    candidates: list[tuple[str, tuple[str, str]]],
) -> list[str]:
    found = []
    for n, (kind, item) in enumerate(candidates):
        requirements = [entry[1] for entry in inputs.requirements if (kind, entry) != ("r", item)]
        constraints = [entry[1] for entry in inputs.constraints if (kind, entry) != ("c", item)]
        attempt = compile_requirements(
            uv, workdir / f"without-{n}", python=python, requirements=requirements,
            constraints=constraints, indexes=indexes,
        )  # fmt: skip
        if attempt.ok:
            found.append(f"{item[0]}: {item[1]}")
    return found


def requirement_name(line: str) -> str | None:
    """The canonical project a requirement line names (None for a line that is not PEP 508)."""
    try:
        return canonicalize_name(Requirement(line).name)
    except InvalidRequirement:
        return None


PYPI = "https://pypi.org/simple"


def golden_cases() -> list[InstallCase]:
    """Every golden whose Dockerfile installs with pip or uv (tests/golden/<strategy>-<framework>/)."""
    from tests.helpers.paths import GOLDEN

    return [
        install_case(f"golden/{folder.name}", folder)
        for folder in sorted(GOLDEN.iterdir())
        if (folder / "Dockerfile").is_file()
    ]


def example_cases(out: Path) -> list[InstallCase]:
    """Every example spec, rendered with `envbuild render` under `out` (one context per target)."""
    import contextlib
    import io

    from envbuild.cli.app import main
    from tests.helpers.paths import EXAMPLES

    cases = []
    for spec in sorted(EXAMPLES.glob("*/envbuild.toml")):
        target_dir = out / spec.parent.name
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["render", "-f", str(spec), "-o", str(target_dir)])
        if code != 0:
            raise AssertionError(f"envbuild render -f {spec.relative_to(EXAMPLES.parent)} exited {code}")
        for context in sorted(p for p in target_dir.iterdir() if (p / "Dockerfile").is_file()):
            suffix = "" if context.name == "default" else f"/{context.name}"
            cases.append(install_case(f"example/{spec.parent.name}{suffix}", context))
    return cases
