"""Files for audit tests that need no download: real ELF objects without device code, and broken ones."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def plain_elf(path: Path) -> Path:
    """A real ELF object with no fatbin (this Python's own binary), copied to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(os.path.realpath(sys.executable), path)
    return path


def truncated(source: Path, path: Path, size: int) -> Path:
    """The first `size` bytes of `source`: an ELF or zip cut off as an interrupted copy leaves it."""
    path.write_bytes(source.read_bytes()[:size])
    return path
