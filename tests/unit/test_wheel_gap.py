"""Which wheels of a wheelhouse serve a locked package (render.wheelgap), judged by real file names
(`pip download` wrote them, for the CI wheelhouses and torch 2.6.0's CUDA stack), the `pip download`
line of a find-links package, and the wheel digests kept between builds (render.wheelhash)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envbuild._util.files import file_sha256
from envbuild.render.wheelgap import Gap, download_commands, takes_python
from envbuild.render.wheelhash import wheel_sha256
from envbuild.render.wheelhouse import installs_on

MARKUPSAFE = (
    "markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"
)
HF_XET = "hf_xet-1.8.0-cp38-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
PSUTIL = "psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.manylinux_2_12_x86_64.manylinux_2_28_x86_64.whl"
SIX = "six-1.16.0-py2.py3-none-any.whl"
CUBLAS = "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl"
TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
JAXLIB = "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_aarch64.whl"


@pytest.mark.parametrize(
    ("filename", "python", "expected"),
    [
        (MARKUPSAFE, "3.11", True),
        (MARKUPSAFE, "3.12", False),  # its own CPython only
        (HF_XET, "3.11", True),  # the stable ABI from 3.8 on
        (HF_XET, "3.7", False),
        (PSUTIL, "3.11", True),
        (SIX, "3.11", True),
        (CUBLAS, "3.12", True),
        (TORCH, "3.11", True),
        (TORCH, "3.10", False),
        ("not-a-wheel.whl", "3.11", False),
    ],
)
def test_a_wheel_takes_the_targets_python_by_its_tags(filename: str, python: str, expected: bool) -> None:
    assert takes_python(filename, python) is expected


def test_a_wheel_for_another_machine_does_not_serve_the_platform() -> None:
    assert installs_on(TORCH, "linux/amd64") and not installs_on(TORCH, "linux/arm64")
    assert installs_on(JAXLIB, "linux/arm64") and not installs_on(JAXLIB, "linux/amd64")
    assert installs_on(SIX, "linux/arm64") and installs_on(SIX, "linux/amd64")


def gap(name: str, version: str, index: str, platform: str = "linux/amd64") -> Gap:
    return Gap(
        target="t", platform=platform, python="3.11", layer="framework", name=name, version=version,
        index=index, found=(),
    )  # fmt: skip


def test_one_download_line_per_index_and_platform_and_a_find_links_page_as_such() -> None:
    releases = "https://storage.googleapis.com/jax-releases/jax_cuda_releases.html"
    commands = download_commands(
        [
            gap("jaxlib", "0.10.2", releases, "linux/arm64"),
            gap("jax", "0.10.2", "https://pypi.org/simple", "linux/arm64"),
            gap("jax", "0.10.2", "https://pypi.org/simple", "linux/arm64"),  # a second target's
            gap("torch", "2.6.0+cu124", "https://download.pytorch.org/whl/cu124"),
        ],
        "/srv/wheel house",
    )
    assert len(commands) == 3
    assert commands[0].endswith(f"--find-links {releases} -d '/srv/wheel house' jaxlib==0.10.2")
    assert "--platform manylinux_2_28_aarch64" in commands[0] and "x86_64" not in commands[0]
    assert commands[1].endswith("--index-url https://pypi.org/simple -d '/srv/wheel house' jax==0.10.2")
    assert commands[2].endswith("-d '/srv/wheel house' torch==2.6.0+cu124")
    assert "--platform manylinux_2_28_x86_64" in commands[2]


def test_a_wheels_digest_is_kept_by_the_files_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    wheel = tmp_path / SIX
    wheel.write_bytes(b"one")
    first = wheel_sha256(str(wheel))
    assert first == file_sha256(str(wheel))
    (kept,) = (tmp_path / "cache" / "wheel-sha256").iterdir()
    kept.write_text("sha256:" + "0" * 64 + "\n")  # the same file again is answered from the cache
    assert wheel_sha256(str(wheel)) == "sha256:" + "0" * 64
    wheel.write_bytes(b"two!")  # new bytes: another size and modification time, so read afresh
    assert wheel_sha256(str(wheel)) == file_sha256(str(wheel)) != first
    kept.write_text("not a digest")  # a damaged entry is a miss, never an answer
    assert wheel_sha256(str(wheel)) == file_sha256(str(wheel))


def test_without_a_cache_directory_every_digest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", "")
    wheel = tmp_path / SIX
    wheel.write_bytes(b"one")
    assert wheel_sha256(str(wheel)) == file_sha256(str(wheel))
    assert os.listdir(tmp_path) == [SIX]
