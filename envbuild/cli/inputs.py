"""What a command's arguments name, loaded: the matrix (--matrix) and the spec (-f).

Its own module so that the handlers (cli.commands) and the CI generators' runs (cli.generators) load
them by one rule without importing each other.
"""

from __future__ import annotations

import argparse


def matrix_of(args: argparse.Namespace, spec=None):
    """The matrix to use: --matrix, else ENVBUILD_MATRIX, else the spec's [site] matrix (for the
    commands that read a spec), else the bundled one."""
    import os

    from envbuild.matrix.load import load_matrix

    if args.matrix is None and not os.environ.get("ENVBUILD_MATRIX") and spec is not None:
        return load_matrix(spec.site.matrix)  # None: the bundled matrix
    return load_matrix(args.matrix)


def spec_of(args: argparse.Namespace):
    from envbuild.spec.model import load_spec

    return load_spec(args.file)
