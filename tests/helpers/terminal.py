"""Run envbuild with its stderr on a real pseudo-terminal, as a developer's shell gives it, and read
back every byte it wrote there (carriage returns and escape sequences included)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys


def run_on_a_terminal(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`python -m envbuild ARGS` with stderr on a pty: (exit code, stdout, what the terminal got,
    with the pty's \\r\\n turned back into \\n)."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "envbuild", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "xterm", **(env or {})},
    )
    os.close(secondary)
    seen = b""
    while True:  # until envbuild closes the terminal: EIO on Linux once no process holds it
        ready, _, _ = select.select([primary], [], [], 120)
        if not ready:
            process.kill()
            raise AssertionError(f"envbuild wrote nothing to its terminal for 120 s: {seen!r}")
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    out = process.stdout.read().decode() if process.stdout else ""
    code = process.wait(timeout=60)
    return code, out, seen.decode().replace("\r\n", "\n")
