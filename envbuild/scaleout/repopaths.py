"""Paths a CI file names (the spec, --matrix), relative to the repository the file is committed to.

A CI runner checks the repository out somewhere else, so an absolute path from the machine that ran
the generator names nothing there, and a path outside the repository is not in the checkout at all.
The repository is the git work tree that holds the CI file being written (the nearest directory above
it with a `.git`), else the current directory.
"""

from __future__ import annotations

import os

from envbuild.errors import UsageError


def repo_root(output: str) -> str:
    """The checkout the CI file at `output` belongs to."""
    probe = os.path.dirname(os.path.realpath(output))
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return os.path.realpath(os.getcwd())
        probe = parent


def repo_relative(path: str, flag: str, root: str, command: str) -> str:
    """`path` relative to `root`, with `/` separators; a UsageError naming `flag` when it is outside."""
    relative = os.path.relpath(os.path.realpath(path), root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        raise UsageError(
            f"{flag} {path}: outside the repository {root}, so a CI runner's checkout does not have it",
            fix=f"move it into {root} (and commit it), or run `envbuild {command}` with -o inside the "
            "repository that holds it",
        )
    return relative.replace(os.sep, "/")
