"""The small image the inventory tests list: Debian's python3 on the bookworm test image, a venv with
one wheel from the local wheelhouse (no network for pip), run as a non-root user as envbuild's images
are. Built once per module that asks (tests/engine/test_inventory.py, test_registry_inventory.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers.docker import docker

SIX = "six-1.17.0-py2.py3-none-any.whl"
DOCKERFILE = f"""FROM {{base}}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY {SIX} /tmp/
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-index --no-cache-dir /tmp/{SIX}
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH NVIDIA_REQUIRE_CUDA="cuda>=13.0"
RUN useradd -m -u 10001 runner
USER runner
"""


def build_probe_image(tag: str, base: str, wheelhouse: Path, context: Path) -> str:
    """Build the probe image as `tag` from `base` in the empty directory `context`; its tag."""
    shutil.copy(wheelhouse / SIX, context / SIX)
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=base))
    built = docker("build", "-t", tag, str(context), check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return tag
