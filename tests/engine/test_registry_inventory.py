"""image.registry_inventory on a real pushed image: what the registry's layers say the image holds is
what the image's own Python and dpkg say in a container (image.inventory), and the image id is the
one the Engine gives the image it pulls: the config digest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.image.inventory import PythonDist, read_inventory
from envbuild.image.registry_inventory import read_registry_inventory

# bookworm_image, wheelhouse and anonymous_registry are fixtures, used by name
from tests.helpers.docker import docker
from tests.helpers.probeimage import build_probe_image
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/registry-inventory"
# a later layer removes what earlier ones installed: pip's whiteout of setuptools' files, and dpkg's
# status rewritten without python3-venv
REMOVING = """FROM {base}
USER root
RUN /opt/venv/bin/pip uninstall -y setuptools && dpkg -r python3-venv
USER runner
"""


@pytest.fixture(scope="module")
def pushed(
    bookworm_image: str, wheelhouse: Path, anonymous_registry: str, tmp_path_factory: pytest.TempPathFactory
):
    """(repo@digest as pushed, the local tag) of the probe image with a removing layer on top."""
    probe = build_probe_image(
        "envbuild-test/registry-inventory:probe", bookworm_image, wheelhouse, tmp_path_factory.mktemp("probe")
    )
    context = tmp_path_factory.mktemp("removing")
    (context / "Dockerfile").write_text(REMOVING.format(base=probe))
    tag = f"{anonymous_registry}/{REPOSITORY}:six"
    built = docker("build", "-t", tag, str(context), check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    push(tag)
    ref = f"{anonymous_registry}/{REPOSITORY}@{manifest_digest(anonymous_registry, REPOSITORY, 'six')}"
    yield ref, tag
    docker("rmi", "-f", tag, ref, probe, check=False)


def test_the_registry_read_equals_the_container_read(pushed: tuple[str, str]) -> None:
    ref, tag = pushed
    from_registry = read_registry_inventory(ref)
    in_container = read_inventory(tag)
    assert from_registry.inventory.os_packages == in_container.os_packages
    assert from_registry.inventory.python == in_container.python
    assert from_registry.inventory.conda == in_container.conda == ()
    assert from_registry.inventory.env == in_container.env
    # the removing layer's whiteouts were applied, and what stayed is there
    assert "setuptools" not in {d.name for d in from_registry.inventory.python}
    assert PythonDist(name="six", version="1.17.0") in from_registry.inventory.python
    names = {p.name for p in from_registry.inventory.os_packages}
    assert "python3" in names and "python3-venv" not in names
    assert from_registry.platform == "linux/amd64"
    labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", tag).stdout)
    assert from_registry.labels == (labels or {})


def test_the_image_id_is_the_config_digest_the_engine_shows_once_pulled(pushed: tuple[str, str]) -> None:
    ref, tag = pushed
    image = read_registry_inventory(ref)
    pulled = docker("pull", ref, check=False)
    assert pulled.returncode == 0, pulled.stderr[-2000:]
    assert docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip() == image.image_id
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip() == image.image_id
