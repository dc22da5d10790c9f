"""Spec settings that contradict the stack a target resolves to: refused before anything is written.

Each used to pass silently and leave an image other than the one the spec describes: a framework
pinned in [packages] pip that the resolved framework does not satisfy (pip then fails late, or a
second torch replaces the CUDA build), and a Python only the deadsnakes PPA has, which envbuild
added without asking. Both are usage errors (exit 2) naming the field and the way out.
"""

from __future__ import annotations

from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix, OperatingSystem
from envbuild.matrix.versions import format_minor
from envbuild.resolve.solver import Stack
from envbuild.spec.lockfile import canonical
from envbuild.spec.model import Spec, Target


def check_framework_pins(spec: Spec, target: Target, stack: Stack, where: str) -> None:
    """A [packages] pip requirement on the framework's own package must allow the resolved release.

    A compatible one (`torch==2.7.1`, `torch>=2.6` for torch 2.7.1) is fine: pip and uv agree with
    the framework layer. A contradicting one names both versions and the field that chooses the
    release, [stack] framework, where the resolver also picks the CUDA build for it."""
    from packaging.requirements import Requirement

    package = canonical(stack.framework.package)
    version = stack.release.version
    for text in spec.packages.pip:
        requirement = Requirement(text)  # validated when the spec was read
        if canonical(requirement.name) != package or not requirement.specifier:
            continue
        if requirement.specifier.contains(version, prereleases=True):
            continue
        wanted = f"{requirement.name}{requirement.specifier}"
        raise UsageError(
            f"{where}: [packages] pip pins {text!r}, but the target resolves to "
            f"{stack.framework.name} {version} (from framework = {target.stack.framework!r})",
            fix=f'set framework = "{wanted}" in [stack] (the resolver then picks the CUDA build for it), '
            f"or drop the pin from [packages] pip",
        )


def check_python_source(
    matrix: Matrix, target: Target, os_row: OperatingSystem, python: str, where: str
) -> str:
    """Where the target's Python comes from: system | deadsnakes | conda.

    A Python other than the OS's python3 comes from the deadsnakes PPA, a third-party archive, only
    when the spec opts in with python-source = "deadsnakes"; otherwise exit 2 with the choices."""
    if target.stack.strategy == "conda":
        return "conda"
    own = format_minor(os_row.python)
    if python == own:
        return "system"
    matching = [o.name for o in matrix.oses.values() if format_minor(o.python) == python]
    other_os = f', or os = "{matching[0]}" (whose python3 is {python})' if matching else ""
    if os_row.family != "ubuntu":
        raise UsageError(
            f"{where}: python {python} is not {os_row.name}'s python3 ({own}), and only Ubuntu has "
            "a standard source for other Pythons",
            fix=f'set python = "{own}"{other_os}, or an Ubuntu os with python-source = "deadsnakes", '
            'or strategy = "conda"',
        )
    if target.stack.python_source != "deadsnakes":
        raise UsageError(
            f'{where}: python = "{python}" is not {os_row.name}\'s python3 ({own}); it would come from the '
            "deadsnakes PPA, a third-party Launchpad archive, which envbuild adds only when asked",
            fix=f'add python-source = "deadsnakes" to [stack] (the image then adds ppa:deadsnakes/ppa and '
            f'installs python{python} from it), or set python = "{own}" (the OS\'s own){other_os}, '
            'or strategy = "conda"',
        )
    return "deadsnakes"
