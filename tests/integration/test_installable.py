"""The installability gate (issue 23, item 3): every golden and every example installs.

For each golden (tests/golden/<strategy>-<framework>/) and each example (examples/*/envbuild.toml,
rendered afresh), the install inputs the Dockerfile names — every layer's -r files and the -c
constraints, with the extras as written — are resolved together by `uv pip compile` for the image's
Python on manylinux_2_28 x86_64. The index is a loopback PEP 691 index (tests/helpers/metaindex.py)
serving the real METADATA of the real PyPI wheels through PEP 658, recorded by
tests/fixtures/metadata/record.py: uv resolves from metadata alone, downloads no wheel, and nothing
leaves 127.0.0.1. A render whose install cannot resolve fails, naming the pin that conflicts.

What the gate sees, and what it cannot:
- Each upstream index URL is replaced by the loopback one serving PyPI's recorded pages; every golden
  and example installs from https://pypi.org/simple except the torch-wheels example's framework layer,
  which reads https://download.pytorch.org/whl/cu118. That index is unreachable from the recorder
  and its torch+cu118 METADATA is not on PyPI, so that one layer is not resolved (NOT_RECORDED says
  so by name, and fails once it no longer matches a rendered layer); the example's user layer is.
- Conda strategies: only the pip layer (user pip packages under the framework's constraints) is
  resolved; the micromamba solve of environment.yml is conda-forge's, out of this gate's view.
- Base-image strategies: the CUDA libraries come from the image, not from pip, so the gate proves the
  pip install resolves but not that the image's bundled cuDNN/NCCL meet the framework's ranges
  (base-image-jax resolves here and still fails at run time: cuDNN 9.1 in the image, JAX wants
  >=9.8). That is the plan's check (issue 23, item 2), not an install resolution.
- Wheels are resolved, not installed or imported: the engine tests build and import real images.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.installable import (
    PYPI,
    InstallCase,
    case_inputs,
    compile_requirements,
    conflicting_lines,
    example_cases,
    golden_cases,
    install_case,
)
from tests.helpers.metaindex import MetadataIndex
from tests.helpers.paths import EXAMPLES, GOLDEN

# Layers on an index the recordings cannot hold: (case, upstream index URL) -> why.
NOT_RECORDED = {
    ("example/torch-wheels", "https://download.pytorch.org/whl/cu118"): (
        "download.pytorch.org is unreachable from the recorder, and torch 2.7.1+cu118's METADATA "
        "(nvidia-*-cu11 requirements) is not on PyPI"
    ),
}

GOLDENS = sorted(p.name for p in GOLDEN.iterdir() if (p / "Dockerfile").is_file())
EXAMPLE_NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/envbuild.toml"))


def _params(prefix: str, names: list[str]) -> list[object]:
    # no render is exempt: one that does not install fails here (wheels-jax did until issue 23)
    return [pytest.param(f"{prefix}/{name}", id=name) for name in names]


@pytest.fixture(scope="module")
def uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


@pytest.fixture(scope="module")
def index() -> Iterator[MetadataIndex]:
    with MetadataIndex() as server:
        yield server


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, InstallCase]:
    rendered = example_cases(tmp_path_factory.mktemp("examples"))
    return {case.name: case for case in golden_cases() + rendered}


def check_installs(case: InstallCase, index: MetadataIndex, uv: str, workdir: Path) -> None:
    """Resolve every layer of `case` whose index is recorded, together; fail naming the conflict."""
    unrecorded = {url for url in case.indexes if url != PYPI}
    unnamed = {url for url in unrecorded if (case.name, url) not in NOT_RECORDED}
    assert not unnamed, (
        f"{case.name} installs from {sorted(unnamed)}, which has no recording: record it "
        "(tests/fixtures/metadata/record.py) or add it to NOT_RECORDED with the reason"
    )
    layers = tuple(layer for layer in case.layers if not set(layer.indexes) & unrecorded)
    assert layers, f"{case.name}: no layer is on a recorded index, so nothing would be checked"
    inputs = case_inputs(case, layers)
    indexes = (index.url,)  # every recorded upstream is PyPI, served on loopback
    requirements = [line for _, line in inputs.requirements]
    constraints = [line for _, line in inputs.constraints]
    resolution = compile_requirements(
        uv, workdir, python=case.python, requirements=requirements, constraints=constraints, indexes=indexes
    )
    if resolution.ok:
        return
    framework_file = layers[0].requirements[0]
    culprits = conflicting_lines(
        uv, workdir / "culprits", case.python, inputs, indexes, framework_file, resolution.explanation
    )
    named = "; ".join(culprits) or "no single pin: several conflict together (see uv's explanation)"
    pytest.fail(
        f"{case.name} cannot install: the rendered requirements do not resolve for Python {case.python} "
        f"on {', '.join(case.indexes)} (served from recorded PyPI METADATA on loopback).\n"
        f"Conflicting pin: {named}\nuv: {resolution.explanation}\n"
        "(If uv says a project or version is not found, the recordings are older than the render: "
        "re-record with `python tests/fixtures/metadata/record.py`.)",
        pytrace=False,
    )


@pytest.mark.parametrize("name", _params("golden", GOLDENS) + _params("example", EXAMPLE_NAMES))
def test_rendered_install_resolves(
    name: str, cases: dict[str, InstallCase], index: MetadataIndex, uv: str, tmp_path: Path
) -> None:
    check_installs(cases[name], index, uv, tmp_path)


def test_the_issues_nvcc_pin_is_named_as_the_conflict(index: MetadataIndex, uv: str, tmp_path: Path) -> None:
    """The issue's input, fixed here so that it outlives the golden's repair: wheels-jax as rendered
    before issue 23 (jax[cuda12]==0.6.2 with every nvidia-*-cu12 at 12.4.*). The gate must refuse it
    and name `nvidia-cuda-nvcc-cu12==12.4.*`, and only that pin, as the conflict."""
    context = tmp_path / "wheels-jax"
    context.mkdir()
    shutil.copy(GOLDEN / "wheels-jax" / "Dockerfile", context / "Dockerfile")
    (context / "requirements-framework.txt").write_text("jax[cuda12]==0.6.2\n")
    (context / "requirements.txt").write_text("einops==0.8.1\n")
    (context / "constraints.txt").write_text(
        "jax==0.6.2\n"
        + "".join(
            f"nvidia-{name}-cu12==12.4.*\n"
            for name in ("cuda-runtime", "cuda-nvrtc", "cuda-cupti", "cuda-nvcc", "nvjitlink", "cublas")
        )
    )
    case = install_case("before/wheels-jax", context)
    with pytest.raises(pytest.fail.Exception) as failed:
        check_installs(case, index, uv, tmp_path / "work")
    message = str(failed.value)
    assert "Conflicting pin: constraints.txt: nvidia-cuda-nvcc-cu12==12.4.*\n" in message, message
    assert "nvidia-cuda-nvcc-cu12>=12.6.85" in message, message  # uv's side of the conflict


def test_a_user_pin_that_breaks_the_framework_is_named(index: MetadataIndex, uv: str, tmp_path: Path) -> None:
    """Layers resolve together: TensorFlow 2.15.1 needs numpy<2, so a user layer pinning numpy 2.1.3
    (recorded for the torch goldens) cannot share its venv, though each layer alone resolves."""
    context = tmp_path / "tf"
    shutil.copytree(GOLDEN / "wheels-tensorflow", context)
    (context / "requirements.txt").write_text("numpy==2.1.3\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        check_installs(install_case("user-pin/wheels-tensorflow", context), index, uv, tmp_path / "work")
    assert "Conflicting pin: requirements.txt: numpy==2.1.3\n" in str(failed.value), str(failed.value)


def test_uv_resolves_from_metadata_alone(index: MetadataIndex, uv: str, tmp_path: Path) -> None:
    """No wheel is fetched: uv reads each candidate's PEP 658 .metadata and stops there."""
    before = sum(n for path, n in index.requests.items() if path.endswith(".whl.metadata"))
    check_installs(install_case("golden/wheels-torch", GOLDEN / "wheels-torch"), index, uv, tmp_path)
    read = sum(n for path, n in index.requests.items() if path.endswith(".whl.metadata"))
    assert read > before, "uv read no .metadata file, so it resolved from something else"
    assert index.wheel_requests == []


def test_not_recorded_names_only_layers_that_exist(cases: dict[str, InstallCase]) -> None:
    """An entry that no longer matches a rendered layer (the example moved to PyPI's build) is stale."""
    used = {(case.name, url) for case in cases.values() for url in case.indexes}
    assert set(NOT_RECORDED) <= used, sorted(set(NOT_RECORDED) - used)
