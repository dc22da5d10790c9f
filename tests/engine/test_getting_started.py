"""docs/getting-started.md, run as a reader runs it: every `$ ` command of its console blocks, in page
order, with bash, in one fresh directory, each held to the output and exit status the page shows
(the conventions are tests/helpers/console.py's: `...` for any lines, `…` for any text in a line,
`# exit N` for a command that fails on purpose).

The commands are the page's, unchanged. What differs from a reader's laptop is the environment they
run in, because CI reaches neither Docker Hub nor PyPI (nor download.pytorch.org):

- `ENVBUILD_BASE_IMAGE=envbuild-test/bookworm:latest` (the `bookworm_image` fixture: Debian 12 made
  by debootstrap) stands in for `debian:bookworm-slim`, and `ENVBUILD_WHEELHOUSE` (the `wheelhouse`
  fixture: torch 2.13.0's CPU build for Python 3.11, six, uv) for PyPI. Both are documented variables
  `envbuild build` reads, the air-gapped path (docs/how-to/air-gapped.md); `render`, `resolve` and
  `doctor` do not read them, so their output is a reader's. The page keeps the outputs that differ
  (the audit of a CPU wheel, the `+cpu` of torch's version) under `...` and `…`.
- `envbuild` on PATH is this checkout's (`python -m envbuild`), and `docker` is the BuildKit-capable
  client the other engine tests use (tests/helpers/docker.py).

Why it takes seconds: the page's spec is TORCH_SPEC (tests/helpers/docker.py) plus an [image] table,
so its build context renders the same layers as the engine tests' session image, and the Engine's
build cache answers every step but the labels; the audit reads the cached layers' facts; the CPU smoke
step runs 20 steps of a small model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from envbuild._util import toml
from tests.helpers import console
from tests.helpers.docker import docker, docker_cli
from tests.helpers.paths import REPO

pytestmark = pytest.mark.docker
PAGE = REPO / "docs" / "getting-started.md"
# envbuild's own variables that would change what the page's commands do; the session's cache
# directory (tests/conftest.py) and the tests' own variables are kept
_KEPT = ("ENVBUILD_CACHE_DIR", "ENVBUILD_TEST_", "ENVBUILD_REQUIRE_DOCKER")


def reader_environment(bin_dir: Path, wheelhouse: Path, base_image: str) -> dict[str, str]:
    """The environment the page's commands run in: a reader's shell, plus the two air-gapped settings."""
    bin_dir.mkdir()
    shim = bin_dir / "envbuild"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m envbuild "$@"\n')
    shim.chmod(0o755)
    (bin_dir / "docker").symlink_to(docker_cli())
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ENVBUILD_") or name.startswith(_KEPT)
    }
    return {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",  # stdout and stderr reach the one pipe in the order they were written
        "ENVBUILD_BASE_IMAGE": base_image,
        "ENVBUILD_WHEELHOUSE": str(wheelhouse),
    }


def remove_tags(spec: Path) -> None:
    """Take back every tag of the spec's [image] repository, which only this page's build makes."""
    if not spec.exists():
        return
    repository = toml.loads(spec.read_text()).get("image", {}).get("repository")
    if not repository:
        return
    listed = docker("images", "--format", "{{.Repository}}:{{.Tag}}", repository, check=False)
    for tag in listed.stdout.split():
        docker("rmi", "-f", tag, check=False)


def test_every_command_of_the_getting_started_page_prints_what_the_page_shows(
    tmp_path: Path, bookworm_image: str, wheelhouse: Path
) -> None:
    commands = console.commands(PAGE.read_text(encoding="utf-8"))
    workdir = tmp_path / "tutorial"
    workdir.mkdir()
    env = reader_environment(tmp_path / "bin", wheelhouse, bookworm_image)
    try:
        for command in commands:
            problem = console.run(command, workdir, env)
            assert problem is None, f"docs/getting-started.md {problem}"
    finally:
        remove_tags(workdir / "envbuild.toml")
