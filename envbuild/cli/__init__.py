"""The `envbuild` command line: parse, call one library function per command, print.

`envbuild.cli:console` is the console-script entry point (pyproject.toml); `main` returns the exit code
(tests call it in-process).
"""

from envbuild.cli.app import console, main

__all__ = ["console", "main"]
