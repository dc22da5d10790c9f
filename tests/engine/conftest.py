"""What the engine tests share, each made once per session (issue 31): the torch CPU image built from
TORCH_SPEC, and its CPU verify report as `envbuild verify --report` writes it. The tests that only
read them use these; `pushed_torch_image` (tests/helpers/runtimeimages.py) pushes it into a test's
own repository when the test writes there.

Each xdist worker that runs engine tests builds its own, under a tag of its own (docker.TORCH_IMAGE).

A test whose subject is an `envbuild build` of its own (the pipeline's stages, a failing smoke step,
a cache test, a signal during the build) keeps its build and says why; the Engine's build cache
makes those builds of TORCH_SPEC's context cheap after the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.docker import TORCH_IMAGE, TORCH_SPEC, docker, render_and_build


@pytest.fixture(scope="session")
def torch_image(
    tmp_path_factory: pytest.TempPathFactory, bookworm_image: str, wheelhouse: Path
) -> Iterator[str]:
    """TORCH_IMAGE: TORCH_SPEC rendered air-gapped from the wheelhouse and built on the bookworm base."""
    render_and_build(
        tmp_path_factory.mktemp("torch-image"), TORCH_SPEC, wheelhouse, bookworm_image, TORCH_IMAGE
    )
    yield TORCH_IMAGE
    docker("rmi", "-f", TORCH_IMAGE, check=False)


@pytest.fixture(scope="session")
def torch_report(torch_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`envbuild verify TORCH_IMAGE --smoke-device cpu --steps 10 --report FILE`: the passing report
    file (image id, device, report, report-digest). Read it; a test that edits one copies it first."""
    path = tmp_path_factory.mktemp("torch-report") / "smoke.json"
    code = main(["verify", torch_image, "--smoke-device", "cpu", "--steps", "10", "--report", str(path)])
    assert code == 0 and json.loads(path.read_text())["report"]["passed"] is True
    path.chmod(0o444)
    return path
