"""The `envbuild` command line: parse, call one library function per command, print.

`envbuild.cli:main` is the console-script entry point (pyproject.toml), so it stays importable here.
"""

from envbuild.cli.app import main

__all__ = ["main"]
