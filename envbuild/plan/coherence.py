"""Spec settings that contradict the stack a target resolves to: refused before anything is written.

Each used to pass silently and leave an image other than the one the spec describes: a framework
pinned in [packages] pip that the resolved framework does not satisfy (pip then fails late, or a
second torch replaces the CUDA build): a usage error (exit 2) naming the field and the way out. The
rule for a Python only the deadsnakes PPA has is a resolve-stage one (resolve/python_source.py), so
that `resolve -f` refuses it as render does.
"""

from __future__ import annotations

from envbuild.errors import UsageError
from envbuild.lockfile.model import canonical
from envbuild.resolve.solver import Stack
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
