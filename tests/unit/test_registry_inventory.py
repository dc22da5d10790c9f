"""image.registry_inventory: what a pushed image holds, read from a registry-shaped server on loopback
(real HTTP, tar layers made here), the layers' whiteouts applied in order, no Docker Engine."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from envbuild.errors import UsageError
from envbuild.image.inventory import CondaPackage, OsPackage, PythonDist
from envbuild.image.registry_inventory import inventory_from_files, inventory_path, read_registry_inventory
from tests.helpers.imagestore import ImageStore, tar_layer

VENV_SITE = "opt/venv/lib/python3.11/site-packages"
DEBIAN_SITE = "usr/lib/python3/dist-packages"


def status(*packages: tuple[str, str]) -> bytes:
    stanzas = [
        f"Package: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
        for name, version in packages
    ]
    return "\n".join(stanzas).encode()


def metadata(name: str, version: str) -> bytes:
    # the body after the headers may hold "Name:"-looking lines; only the headers count
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-this\n".encode()


def conda(name: str, version: str) -> bytes:
    return json.dumps(
        {
            "name": name,
            "version": version,
            "build": "h0_0",
            "channel": "https://conda.anaconda.org/conda-forge/linux-64",
            "subdir": "linux-64",
        }
    ).encode()


BASE = tar_layer(
    {
        "var/lib/dpkg/status": status(("bash", "5.2.15-2+b2"), ("python3", "3.11.2-1+b1")),
        "usr/share/doc/bash/copyright": b"not kept",
        f"{DEBIAN_SITE}/six-1.16.0.dist-info/METADATA": metadata("six", "1.16.0"),
        f"{VENV_SITE}/pip-23.0.1.dist-info/METADATA": metadata("pip", "23.0.1"),
        f"{VENV_SITE}/six-1.16.0.dist-info/METADATA": metadata("six", "1.16.0"),
        f"{VENV_SITE}/gone-1.0.dist-info/METADATA": metadata("gone", "1.0"),
        "opt/venv/pyvenv.cfg": b"home = /usr/bin\ninclude-system-site-packages = false\n",
        "opt/conda/conda-meta/old-1.0-h0_0.json": conda("old", "1.0"),
        "opt/conda/conda-meta/kept-2.0-h0_0.json": conda("kept", "2.0"),
        "opt/conda/conda-meta/history": b"not json",
    }
)
TOP = tar_layer(
    {
        # dpkg rewrites its status: the last writer wins
        "var/lib/dpkg/status": status(("bash", "5.2.15-2+b2"), ("curl", "7.88.1-10+deb12u5")),
        # pip upgraded six: the old dist-info deleted by a whiteout, the new one added
        f"{VENV_SITE}/.wh.six-1.16.0.dist-info": b"",
        f"{VENV_SITE}/six-1.17.0.dist-info/METADATA": metadata("six", "1.17.0"),
        # `pip uninstall gone`: its directory replaced by an (empty) directory that is opaque
        f"{VENV_SITE}/gone-1.0.dist-info": None,
        f"{VENV_SITE}/gone-1.0.dist-info/.wh..wh..opq": b"",
        # the conda env rebuilt: an opaque conda-meta hides every record below
        "opt/conda/conda-meta": None,
        "opt/conda/conda-meta/.wh..wh..opq": b"",
        "opt/conda/conda-meta/kept-2.0-h0_0.json": conda("kept", "2.0"),
        "opt/conda/conda-meta/new-3.0-h0_0.json": conda("new", "3.0"),
    }
)
ENV = ["PATH=/opt/venv/bin:/usr/bin", "VIRTUAL_ENV=/opt/venv", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"]


@pytest.fixture
def store() -> Iterator[ImageStore]:
    with ImageStore() as server:
        yield server  # type: ignore[misc]


def amd64_and_arm64(store: ImageStore) -> tuple[str, str, str]:
    """(index digest, amd64 config digest, arm64 config digest)."""
    amd, amd_config = store.add_image(
        [BASE, TOP],
        {
            "os": "linux",
            "architecture": "amd64",
            "config": {"Env": ENV, "Labels": {"io.envbuild.target": "t"}},
        },
    )
    arm, arm_config = store.add_image(
        [tar_layer({"var/lib/dpkg/status": status(("arm-only", "1"))})],
        {"os": "linux", "architecture": "arm64", "variant": "v8", "config": {}},
    )
    return store.add_index({"linux/arm64": arm, "linux/amd64": amd}), amd_config, arm_config


def test_the_layers_whiteouts_decide_what_is_listed(store: ImageStore) -> None:
    index, config_digest, _ = amd64_and_arm64(store)
    image = read_registry_inventory(store.ref(index))
    assert image.image_id == config_digest
    assert image.platform == "linux/amd64"
    assert image.labels == {"io.envbuild.target": "t"}
    inventory = image.inventory
    assert [(p.name, p.version) for p in inventory.os_packages] == [
        ("bash", "5.2.15-2+b2"),
        ("curl", "7.88.1-10+deb12u5"),
    ]
    assert inventory.os_packages[0] == OsPackage(
        name="bash", version="5.2.15-2+b2", architecture="amd64", source="bash"
    )
    # the venv only (its pyvenv.cfg keeps the system's dist-packages out); six as upgraded, gone gone
    assert inventory.python == (
        PythonDist(name="pip", version="23.0.1"),
        PythonDist(name="six", version="1.17.0"),
    )
    assert [(c.name, c.version, c.channel) for c in inventory.conda] == [
        ("kept", "2.0", "conda-forge"),
        ("new", "3.0", "conda-forge"),
    ]
    assert isinstance(inventory.conda[0], CondaPackage)
    assert inventory.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.4"


def test_another_platform_of_the_index_on_request(store: ImageStore) -> None:
    index, _, arm_config = amd64_and_arm64(store)
    image = read_registry_inventory(store.ref(index), platform="linux/arm64")
    assert (image.image_id, image.platform) == (arm_config, "linux/arm64/v8")
    assert [p.name for p in image.inventory.os_packages] == ["arm-only"]
    assert image.inventory.python == () and image.inventory.env == {}


def test_a_single_platform_image_of_another_architecture_is_read_as_it_is(store: ImageStore) -> None:
    arm, arm_config = store.add_image(
        [tar_layer({"var/lib/dpkg/status": status(("arm-only", "1"))})],
        {"os": "linux", "architecture": "arm64", "config": {}},
    )
    image = read_registry_inventory(store.ref(arm))
    assert (image.image_id, image.platform) == (arm_config, "linux/arm64")


def test_an_index_without_amd64_and_several_platforms_names_them(store: ImageStore) -> None:
    layer = [tar_layer({"etc/hostname": b"x"})]
    arm, _ = store.add_image(layer, {"os": "linux", "architecture": "arm64"})
    ppc, _ = store.add_image(layer, {"os": "linux", "architecture": "ppc64le"})
    index = store.add_index({"linux/arm64": arm, "linux/ppc64le": ppc})
    with pytest.raises(UsageError, match="without a linux/amd64 image; it has linux/arm64, linux/ppc64le"):
        read_registry_inventory(store.ref(index))


def test_only_the_inventory_files_are_kept() -> None:
    assert inventory_path("var/lib/dpkg/status")
    assert not inventory_path("var/lib/dpkg/status-old")
    assert inventory_path(f"{VENV_SITE}/six-1.17.0.dist-info/METADATA")
    assert inventory_path("usr/lib/python3/dist-packages/apt_pkg-2.6.0.egg-info")  # a single-file egg-info
    assert inventory_path("usr/lib/python3/dist-packages/chardet-5.1.0.egg-info/PKG-INFO")
    assert not inventory_path(f"{VENV_SITE}/six-1.17.0.dist-info/RECORD")
    assert not inventory_path("opt/src/six-1.17.0.dist-info/METADATA")  # not in a site directory
    assert not inventory_path(f"{VENV_SITE}/torch/lib/libtorch.so")
    assert inventory_path("opt/conda/conda-meta/python-3.11.9-h0_0.json")
    assert not inventory_path("opt/conda/conda-meta/history")
    assert inventory_path("opt/venv/pyvenv.cfg")


def _listed(files: dict[str, bytes], env: dict[str, str]) -> list[tuple[str, str]]:
    inventory = inventory_from_files(files, env, lambda path: files[path].decode())
    return [(d.name, d.version) for d in inventory.python]


DEBIAN = {
    "usr/local/lib/python3.11/dist-packages/local-1.0.dist-info/METADATA": metadata("local", "1.0"),
    f"{DEBIAN_SITE}/six-1.16.0.dist-info/METADATA": metadata("six", "1.16.0"),
    f"{DEBIAN_SITE}/chardet-5.1.0.egg-info/PKG-INFO": metadata("chardet", "5.1.0"),
    f"{DEBIAN_SITE}/apt_pkg-2.6.0.egg-info": metadata("python-apt", "2.6.0"),
}


def test_without_a_venv_or_conda_the_system_python3s_directories_are_listed() -> None:
    assert _listed(DEBIAN, {}) == [
        ("chardet", "5.1.0"),
        ("local", "1.0"),
        ("python-apt", "2.6.0"),
        ("six", "1.16.0"),
    ]
    # a python.org build in /usr/local is first on PATH, and sees only its own site-packages
    official = {
        **DEBIAN,
        "usr/local/lib/python3.12/site-packages/pip-24.0.dist-info/METADATA": metadata("pip", "24.0"),
    }
    assert _listed(official, {}) == [("pip", "24.0")]


def test_a_venv_with_system_site_packages_lists_its_own_first() -> None:
    venv = {
        **DEBIAN,
        f"{VENV_SITE}/six-1.17.0.dist-info/METADATA": metadata("six", "1.17.0"),
        "opt/venv/pyvenv.cfg": b"home = /usr/bin\ninclude-system-site-packages = true\n",
    }
    listed = _listed(venv, {"VIRTUAL_ENV": "/opt/venv/"})
    assert ("six", "1.17.0") in listed and ("six", "1.16.0") not in listed
    assert ("chardet", "5.1.0") in listed
    # an unset VIRTUAL_ENV: the system python3's, though the venv is on disk
    assert ("six", "1.16.0") in _listed(venv, {})


def test_the_conda_env_named_by_conda_prefix() -> None:
    files = {
        "opt/env/conda-meta/a-1-h0.json": conda("a", "1"),
        "opt/env/lib/python3.11/site-packages/numpy-2.0.0.dist-info/METADATA": metadata("numpy", "2.0.0"),
        "opt/conda/conda-meta/base-1-h0.json": conda("base", "1"),
        "opt/conda/lib/python3.12/site-packages/conda-24.1.0.dist-info/METADATA": metadata("conda", "24.1.0"),
    }
    env = {"CONDA_PREFIX": "/opt/env"}
    inventory = inventory_from_files(files, env, lambda path: files[path].decode())
    assert [c.name for c in inventory.conda] == ["a"]
    assert [d.name for d in inventory.python] == ["numpy"]
    assert [c.name for c in inventory_from_files(files, {}, lambda p: files[p].decode()).conda] == ["base"]


def test_every_gzip_member_of_a_layer_is_inventoried(store: ImageStore) -> None:
    """Issue 33: the inventory behind the SBOM read a layer only to the end of its first gzip member,
    so an eStargz-style layer (members concatenated, as `cat a.gz b.gz` makes) hid the dpkg status and
    a planted Python package in its second member. Docker, containerd and GNU tar read them all."""
    import gzip

    whole = gzip.decompress(
        tar_layer(
            {
                "opt/venv/pyvenv.cfg": b"home = /usr/bin\n",
                "var/lib/dpkg/status": status(("bash", "5.2.15-2+b2")),
                f"{VENV_SITE}/planted-6.6.6.dist-info/METADATA": metadata("planted", "6.6.6"),
            }
        )
    )
    cut = whole.index(b"var/lib/dpkg/status") // 512 * 512  # the second entry's header starts there
    layer = gzip.compress(whole[:cut]) + gzip.compress(whole[cut:])
    manifest, _ = store.add_image([layer], {"os": "linux", "architecture": "amd64", "config": {"Env": ENV}})
    inventory = read_registry_inventory(store.ref(manifest)).inventory
    assert [(p.name, p.version) for p in inventory.os_packages] == [("bash", "5.2.15-2+b2")]
    assert PythonDist(name="planted", version="6.6.6") in inventory.python
