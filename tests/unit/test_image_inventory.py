"""The inventory's pure parsers, on real captured text: tests/fixtures/attest/inventory-torch.txt is
what image.inventory's script printed in a torch 2.13.0 image envbuild built FROM the bookworm test
image (dpkg status with python3, the venv's distributions, no conda env)."""

from __future__ import annotations

import pytest

from envbuild.errors import EnvbuildError
from envbuild.image.inventory import (
    CondaPackage,
    OsPackage,
    PythonDist,
    inventory_script,
    parse_conda_meta,
    parse_dpkg_status,
    parse_env,
    parse_inventory,
    split_sections,
)
from tests.helpers.paths import FIXTURES

CAPTURE = (FIXTURES / "attest" / "inventory-torch.txt").read_text(encoding="utf-8")
MARKER = CAPTURE.split("\n", 1)[0].rsplit(" ", 1)[0]  # the nonce marker of the run that captured it


def test_the_capture_parses_into_dpkg_python_and_no_conda() -> None:
    inventory = parse_inventory(CAPTURE, MARKER, {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0"})
    assert len(inventory.os_packages) == 118
    python3 = [p for p in inventory.os_packages if p.name == "python3"]
    assert python3 == [
        OsPackage(name="python3", version="3.11.2-1+b1", architecture="amd64", source="python3-defaults")
    ]
    assert PythonDist(name="torch", version="2.13.0+cpu") in inventory.python
    # canonical names, as the record's dependencies spell them
    assert {"jinja2", "markupsafe", "typing-extensions"} <= {d.name for d in inventory.python}
    assert inventory.conda == ()
    assert inventory.env == {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0"}


def test_only_installed_dpkg_entries_are_listed() -> None:
    text = (
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\nArchitecture: amd64\n\n"
        "Package: half\nStatus: install ok half-configured\nVersion: 2.0\nArchitecture: amd64\n\n"
        "Package: here\nStatus: install ok installed\nVersion: 3.0\nArchitecture: all\n"
        "Description: a package\n Version: 9.9 (a continuation line, not a field)\n"
    )
    assert parse_dpkg_status(text) == (
        OsPackage(name="here", version="3.0", architecture="all", source="here"),
    )


def test_a_cut_output_is_an_error_not_a_short_inventory() -> None:
    cut = CAPTURE[: CAPTURE.index(f"{MARKER} python")]
    with pytest.raises(EnvbuildError, match="cut short"):
        split_sections(cut, MARKER)
    # a file line that merely looks like a marker of another run ends nothing
    forged = CAPTURE.replace("Package: zlib1g\n", "Package: zlib1g\n--envbuild-inventory-0-- end\n", 1)
    assert len(parse_inventory(forged, MARKER, {}).os_packages) == 118


def test_an_image_without_python_has_no_python_packages() -> None:
    text = (
        f"{MARKER} dpkg\nPackage: bash\nStatus: install ok installed\nVersion: 5.2\n\n"
        f"{MARKER} python\n\n{MARKER} end\n"
    )
    inventory = parse_inventory(text, MARKER, {})
    assert inventory.python == ()
    assert [p.name for p in inventory.os_packages] == ["bash"]


def test_conda_meta_gives_name_build_channel_and_sha256() -> None:
    # the fields micromamba writes in conda-meta/<name>-<version>-<build>.json (channel as a URL)
    meta = (
        '{"name": "libzlib", "version": "1.3.1", "build": "hb9d3cd8_2", "build_number": 2,'
        ' "channel": "https://conda.anaconda.org/conda-forge/linux-64", "subdir": "linux-64",'
        ' "url": "https://user:secret@conda.example/conda-forge/linux-64/libzlib-1.3.1-hb9d3cd8_2.conda",'
        ' "sha256": "' + "AB" * 32 + '", "files": ["lib/libz.so.1"]}'
    )
    (package,) = parse_conda_meta([meta, "not json"])
    assert package == CondaPackage(
        name="libzlib",
        version="1.3.1",
        build="hb9d3cd8_2",
        channel="conda-forge",
        subdir="linux-64",
        url="https://***@conda.example/conda-forge/linux-64/libzlib-1.3.1-hb9d3cd8_2.conda",
        sha256="ab" * 32,
    )


def test_env_and_script() -> None:
    assert parse_env(["PATH=/opt/venv/bin:/usr/bin", "A=b=c", "EMPTY="]) == {
        "PATH": "/opt/venv/bin:/usr/bin",
        "A": "b=c",
        "EMPTY": "",
    }
    script = inventory_script("--m--")
    assert "/var/lib/dpkg/status" in script and "conda-meta" in script and "--m-- end" not in script
