"""The Docker CLI as the benchmarks call it: BuildKit on, and a failure that says why.

`$DOCKER_CLI` first (CI points it at Debian's BuildKit-capable client), else /usr/bin/docker, else the
`docker` first on PATH, which may be a newer client without buildx.
"""

from __future__ import annotations

import os
import subprocess
import sys


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...`; on failure print the tail of its stderr (a full disk, a broken mirror),
    then raise CalledProcessError."""
    cli = os.environ.get("DOCKER_CLI") or (
        "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    )
    result = subprocess.run(
        [cli, *args], capture_output=True, text=True, env={**os.environ, "DOCKER_BUILDKIT": "1"}
    )
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])
        result.check_returncode()
    return result
