"""uv's wheel for another machine, fetched (issue 38): on an x86_64 host, `render` of a linux/arm64
target with no wheelhouse takes uv's aarch64 wheel from the spec's index (a loopback index holding the
real wheel from ENVBUILD_TEST_WHEELHOUSE_ARM64), checks its sha256 against the listing and the binary
against its RECORD, caches it, reuses the cache offline, and fetches a corrupted cached file again."""

from __future__ import annotations

import hashlib
import platform
import shutil
import zipfile
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.spec.mirrors import NO_MIRRORS
from envbuild.vendor.uvwheel import cached_uv_wheel
from tests.helpers.vendoring import uv_wheel

SPEC = """[stack]
driver = "570"
framework = "jax==0.6.2"
gpus = ["H100"]
strategy = "base-image"
os = "ubuntu22.04"
platform = "linux/arm64"

[packages]
index-url = "{index}"

[image]
installer = "uv"
"""


@pytest.fixture
def arm_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if platform.machine() != "x86_64":
        pytest.fail("this test expects an x86_64 host (the CI machines are)")
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    directory = tmp_path / "index"
    directory.mkdir()
    wheel = shutil.copy(uv_wheel("ENVBUILD_TEST_WHEELHOUSE_ARM64"), directory)
    with PackageIndex(directory) as index:
        yield index, Path(wheel)


def binary_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".data/scripts/uv"))
        return archive.read(name)


def test_render_of_an_arm64_target_fetches_uv_and_caches_it(capsys, tmp_path: Path, arm_index) -> None:
    index, wheel = arm_index
    spec = tmp_path / "envbuild.toml"
    spec.write_text(SPEC.format(index=index.url))
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    placed = tmp_path / "out" / "default" / "uv" / "uv"
    assert hashlib.sha256(placed.read_bytes()).digest() == hashlib.sha256(binary_of(wheel)).digest()
    index.settle()
    assert index.requests[f"/files/{wheel.name}"] == 1
    cached = tmp_path / "cache" / "uv" / wheel.name
    assert cached.read_bytes() == wheel.read_bytes()

    index.stop()  # offline: the cache answers
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out2")]) == 0, capsys.readouterr().err
    assert (tmp_path / "out2" / "default" / "uv" / "uv").read_bytes() == placed.read_bytes()


def test_a_corrupted_cached_wheel_is_fetched_again(tmp_path: Path, arm_index) -> None:
    index, wheel = arm_index
    first = Path(cached_uv_wheel("linux/arm64", index=index.url, mirrors=NO_MIRRORS))
    first.write_bytes(b"corrupted")
    again = Path(cached_uv_wheel("linux/arm64", index=index.url, mirrors=NO_MIRRORS))
    assert again == first and again.read_bytes() == wheel.read_bytes()
    index.settle()
    assert index.requests[f"/files/{wheel.name}"] == 2
