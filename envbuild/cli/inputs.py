"""What a command's arguments name, loaded: the matrix (--matrix) and the spec (-f).

Its own module so that the handlers (cli.commands) and the CI generators' runs (cli.generators) load
them by one rule without importing each other.
"""

from __future__ import annotations

import argparse


def matrix_of(args: argparse.Namespace):
    """The matrix the --matrix option names (default: the bundled one)."""
    from envbuild.matrix.load import load_matrix

    return load_matrix(args.matrix)


def spec_of(args: argparse.Namespace):
    from envbuild.spec.model import load_spec

    return load_spec(args.file)
