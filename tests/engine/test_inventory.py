"""image.inventory on the real Engine: what an image holds, read in one throwaway container."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.image.inventory import OsPackage, PythonDist, read_inventory

# bookworm_image and wheelhouse are fixtures, used by name
from tests.helpers.docker import docker
from tests.helpers.probeimage import build_probe_image

pytestmark = pytest.mark.docker

PROBE_IMAGE = "envbuild-test/inventory:six"


def inventory_containers(image: str) -> list[str]:
    """This module's inventory containers (other users of the engine may run their own meanwhile)."""
    return docker(
        "ps", "-aq", "--filter", "label=io.envbuild.role=inventory", "--filter", f"ancestor={image}"
    ).stdout.split()


@pytest.fixture(scope="module")
def probe_image(bookworm_image: str, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_probe_image(
        PROBE_IMAGE, bookworm_image, wheelhouse, tmp_path_factory.mktemp("inventory-context")
    )


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
