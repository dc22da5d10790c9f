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


def replaying_cuobjdump(directory: Path, capture: Path, stdout: Path | None = None) -> str:
    """A cuobjdump that replays a captured run of NVIDIA's (tests/fixtures/audit/*.run.json: its exit
    code, stderr and `--version` text; `stdout`, the listing it printed): what cuobjdump 13 does on a
    library it cannot read to the end, without the 363 MB wheel. The path given replaces `{path}`."""
    script = directory / "cuobjdump"
    listing = str(stdout) if stdout else ""
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"run = json.load(open({str(capture)!r}))\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    sys.stdout.write(run['version'])\n"
        "    sys.exit(0)\n"
        f"if {listing!r}:\n"
        f"    sys.stdout.write(open({listing!r}).read())\n"
        "sys.stderr.write(run['stderr'].replace('{path}', sys.argv[-1]))\n"
        "sys.exit(run['returncode'])\n"
    )
    script.chmod(0o755)
    return str(script)
