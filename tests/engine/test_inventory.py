"""image.inventory on the real Engine: what an image holds, read in one throwaway container."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.image.inventory import OsPackage, PythonDist, read_inventory

# bookworm_image and wheelhouse are fixtures, used by name
from tests.helpers.docker import docker

pytestmark = pytest.mark.docker

PROBE_IMAGE = "envbuild-test/inventory:six"
SIX = "six-1.17.0-py2.py3-none-any.whl"
# python3 from Debian, a venv with one wheel from the local wheelhouse (no network for pip), run as a
# non-root user as envbuild's images are
DOCKERFILE = f"""FROM {{base}}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY {SIX} /tmp/
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-index --no-cache-dir /tmp/{SIX}
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH NVIDIA_REQUIRE_CUDA="cuda>=13.0"
RUN useradd -m -u 10001 runner
USER runner
"""


def inventory_containers(image: str) -> list[str]:
    """This module's inventory containers (other users of the engine may run their own meanwhile)."""
    return docker(
        "ps", "-aq", "--filter", "label=io.envbuild.role=inventory", "--filter", f"ancestor={image}"
    ).stdout.split()


@pytest.fixture(scope="module")
def probe_image(bookworm_image: str, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    context = tmp_path_factory.mktemp("inventory-context")
    shutil.copy(wheelhouse / SIX, context / SIX)
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=bookworm_image))
    built = docker("build", "-t", PROBE_IMAGE, str(context), check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return PROBE_IMAGE


def test_an_image_with_python_lists_dpkg_the_venv_and_its_env(probe_image: str) -> None:
    inventory = read_inventory(probe_image)
    real = docker(
        "run", "--rm", "--network", "none", probe_image, "dpkg-query", "-W", "-f=${Version}", "python3"
    )
    python3 = [p for p in inventory.os_packages if p.name == "python3"]
    assert python3 == [
        OsPackage(
            name="python3", version=real.stdout.strip(), architecture="amd64", source="python3-defaults"
        )
    ]
    assert PythonDist(name="six", version="1.17.0") in inventory.python
    assert "pip" in {d.name for d in inventory.python}  # the venv's own, from ensurepip
    assert inventory.conda == ()
    assert inventory.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=13.0"
    assert inventory.env["VIRTUAL_ENV"] == "/opt/venv"
    assert inventory_containers(probe_image) == []


def test_an_image_without_python_has_no_python_packages(bookworm_image: str) -> None:
    inventory = read_inventory(bookworm_image)
    assert inventory.python == ()
    assert "bash" in {p.name for p in inventory.os_packages}
    assert "python3" not in {p.name for p in inventory.os_packages}
    assert inventory_containers(bookworm_image) == []
