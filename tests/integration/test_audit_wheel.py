"""`envbuild audit` on a real CUDA wheel from PyPI: jax-cuda12-plugin 0.10.2 (8 MB), downloaded once
per session. The reader is cross-checked against cuobjdump run directly, and the verdicts and exit
codes are those of the issue: an RTX 5090 gets native sm_120 SASS, a K80 no kernel image.

Needs https://pypi.org: skips without it, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI).
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from envbuild.audit.kernels import cuobjdump_binary, read_kernels
from envbuild.audit.tree import audit_tree
from envbuild.cli.app import main
from tests.helpers.pypi import pypi_wheel

pytestmark = pytest.mark.pypi

JAX_SASS = ["sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120"]
WITH_KERNELS = ["jax_cuda12_plugin/_linalg.so", "jax_cuda12_plugin/_prng.so", "jax_cuda12_plugin/_solver.so"]
NO_KERNEL = "no kernel image is available for execution on the device"


@pytest.fixture(scope="session")
def jax_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pypi_wheel("jax-cuda12-plugin==0.10.2", tmp_path_factory.mktemp("pypi"))


@pytest.fixture(scope="session")
def jax_tree(jax_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("jax-plugin")
    with zipfile.ZipFile(jax_wheel) as archive:
        archive.extractall(root)
    return root


def _cuobjdump(flag: str, path: Path) -> set[str]:
    """The arch of every entry `cuobjdump --list-elf` or `--list-ptx` prints, read here on its own."""
    done = subprocess.run([cuobjdump_binary(), flag, str(path)], capture_output=True, text=True, check=False)
    if "does not contain device code" in done.stdout + done.stderr:
        return set()
    assert done.returncode == 0, done.stderr
    names = re.findall(r"^(?:ELF|PTX) file\s+\d+: \S+\.(sm_\w+)\.(?:cubin|ptx)$", done.stdout, re.M)
    assert len(names) == len(done.stdout.splitlines()), done.stdout
    return set(names) if flag == "--list-elf" else {n.replace("sm_", "compute_", 1) for n in names}


def test_reader_agrees_with_cuobjdump_on_every_object(jax_tree: Path) -> None:
    objects = sorted(jax_tree.rglob("*.so"))
    assert len(objects) == 11
    with_code = []
    for path in objects:
        kernels = read_kernels(str(path))
        assert set(kernels.sass) == _cuobjdump("--list-elf", path), path.name
        assert set(kernels.ptx) == _cuobjdump("--list-ptx", path), path.name
        if kernels.has_device_code:
            with_code.append(path.relative_to(jax_tree).as_posix())
    assert with_code == WITH_KERNELS


def test_the_plugin_carries_sm_101_and_sm_120_sass(jax_tree: Path) -> None:
    """The issue's finding: the matrix row said sm_50..sm_100 + compute_120; the artifact says more."""
    kernels = read_kernels(str(jax_tree / "jax_cuda12_plugin" / "_linalg.so"))
    assert list(kernels.sass) == JAX_SASS and kernels.ptx == ("compute_120",)


def test_object_without_device_code_is_reported_as_such(jax_tree: Path) -> None:
    audit = audit_tree(str(jax_tree), (), target="jax", only=("jax_cuda12_plugin/cuda_plugin_extension.so",))
    assert audit.libraries == () and audit.ok
    assert audit.without_device_code == ("jax_cuda12_plugin/cuda_plugin_extension.so",)


def test_k80_has_no_kernel_image_and_exits_1(jax_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(jax_wheel), "--gpu", "RTX 5090", "--gpu", "K80"])
    out, err = capsys.readouterr()
    assert code == 1, err
    for library in WITH_KERNELS:
        assert f"error: Tesla K80: {NO_KERNEL} ({library})" in out
        block = out.split(f"\n{library}\n", 1)[1].split("\n\n", 1)[0]
        assert "  RTX 5090: native SASS" in block and f"  Tesla K80: {NO_KERNEL}" in block
        assert "SASS: " + ", ".join(JAX_SASS) in block


def test_h100_runs_natively_and_exits_0(jax_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(jax_wheel), "--gpu", "H100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count("  H100: native SASS") == 3 and "error:" not in out


def test_json(jax_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(jax_wheel), "--gpu", "RTX 5090", "--gpu", "K80", "--gpu", "8.6", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    assert document["target"] == str(jax_wheel) and document["framework"] == "jax"
    assert [g["compute_capability"] for g in document["gpus"]] == ["12.0", "3.7", "8.6"]
    names = [g["name"] for g in document["gpus"]]
    assert [lib["path"] for lib in document["libraries"]] == WITH_KERNELS
    for library in document["libraries"]:
        assert library["sass"] == JAX_SASS and library["ptx"] == ["compute_120"] and library["counts"]
        assert library["verdicts"] == {
            names[0]: "native",
            names[1]: "no-kernel-image",
            names[2]: "same-major",
        }
    assert len(document["without_device_code"]) == 8
    assert document["ok"] is False
    assert document["failures"] == [
        {"gpu": "Tesla K80", "library": library, "error": NO_KERNEL} for library in WITH_KERNELS
    ]
    assert document["runs"] == {names[0]: True, "Tesla K80": False, names[2]: True}


def test_framework_flag_decides_which_libraries_count(
    jax_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--framework torch on a JAX plugin: none of torch's libraries are in it, so none count, and
    that fails on its own (the K80 verdicts in JAX's libraries do not)."""
    code = main(["audit", str(jax_wheel), "--gpu", "K80", "--framework", "torch", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [lib["counts"] for lib in document["libraries"]] == [False, False, False]
    assert document["failures"] == [] and document["framework_missing"] is True
    assert document["runs"] == {"Tesla K80": False}
