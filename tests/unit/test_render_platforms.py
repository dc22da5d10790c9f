"""`envbuild render` per platform (issue 19, "Render"): a target with several platforms gets one
context per platform under <out>/<target>/<arch>/, each labelled with its platform and carrying the
wheels and the uv binary of its own machine; a single-platform target keeps <out>/<target>/."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from envbuild._testing.pyindex import build_wheel
from envbuild.cli.app import main
from envbuild.render.wheelhouse import framework_closure, installs_on, split_wheelhouse

SPEC = """[stack]
driver = "570"
framework = "jax==0.6.2"
gpus = ["H100"]
strategy = "base-image"
os = "ubuntu22.04"
{platform}

[image]
repository = "registry.example/team/jax"
installer = "{installer}"
"""
BOTH = 'platform = ["linux/amd64", "linux/arm64"]'


def write_spec(tmp_path: Path, platform: str, installer: str = "pip") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(SPEC.format(platform=platform, installer=installer))
    return path


def tagged(directory: Path, name: str, version: str, tag: str, requires: tuple[str, ...] = ()) -> str:
    """A wheel of `name` renamed to a binary wheel's platform tag: the split reads names and METADATA."""
    built = build_wheel(directory, name, version, requires)
    path = built.with_name(f"{built.name.split('-py3-')[0]}-cp311-cp311-{tag}.whl")
    built.rename(path)
    return path.name


def uv_wheel(directory: Path, machine: str, binary: bytes) -> None:
    """uv's wheel for `machine` at the host's uv version, its RECORD stating the binary's sha256."""
    version = metadata.version("uv")
    digest = base64.urlsafe_b64encode(hashlib.sha256(binary).digest()).rstrip(b"=").decode()
    path = directory / f"uv-{version}-py3-none-manylinux_2_17_{machine}.manylinux2014_{machine}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"uv-{version}.data/scripts/uv", binary)
        archive.writestr(
            f"uv-{version}.dist-info/RECORD",
            f"uv-{version}.data/scripts/uv,sha256={digest},{len(binary)}\nuv-{version}.dist-info/RECORD,,\n",
        )


def test_a_two_platform_target_renders_one_context_per_platform(tmp_path: Path, capsys) -> None:
    spec = write_spec(tmp_path, BOTH)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in (out / "default").iterdir()) == [".envbuild-context", "amd64", "arm64"]
    for arch in ("amd64", "arm64"):
        dockerfile = (out / "default" / arch / "Dockerfile").read_text()
        assert f'"io.envbuild.platform"="linux/{arch}"' in dockerfile
        assert f"{out / 'default' / arch}: jax 0.6.2" in printed
        assert "amd64" not in dockerfile.replace('"linux/amd64"', "")  # nothing else names a platform
    amd, arm = ((out / "default" / a / "Dockerfile").read_text() for a in ("amd64", "arm64"))
    assert amd.replace("linux/amd64", "linux/arm64") == arm  # the label is all that differs unlocked

    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0  # its own output is replaced
    assert main(["render", "-f", str(spec), "--stdout", "-o", str(out)]) == 0
    assert "# ---- default/arm64/Dockerfile" in capsys.readouterr().out


@pytest.mark.parametrize("platform", ['platform = "linux/arm64"', ""])
def test_a_single_platform_target_keeps_its_directory(tmp_path: Path, platform: str) -> None:
    spec = write_spec(tmp_path, platform)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    dockerfile = (out / "default" / "Dockerfile").read_text()
    wanted = "linux/arm64" if platform else "linux/amd64"
    assert f'"io.envbuild.platform"="{wanted}"' in dockerfile


def test_the_wheelhouse_split_keeps_each_platforms_wheels(tmp_path: Path) -> None:
    house = tmp_path / "house"
    amd = tagged(
        house, "torch", "2.12.0", "manylinux_2_28_x86_64", ('armonly>=1; platform_machine == "aarch64"',)
    )
    arm = tagged(
        house, "torch", "2.12.0", "manylinux_2_28_aarch64", ('armonly>=1; platform_machine == "aarch64"',)
    )
    build_wheel(house, "armonly", "1.0")
    build_wheel(house, "six", "1.17.0")
    assert installs_on(amd, "linux/amd64") and not installs_on(amd, "linux/arm64")
    assert installs_on("x-1-py3-none-any.whl", "linux/arm64")
    assert installs_on("n-1-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.whl", "linux/arm64")

    assert framework_closure(str(house), ("torch==2.12.0",), "3.11", "linux/amd64") == {amd}
    assert framework_closure(str(house), ("torch==2.12.0",), "3.11", "linux/arm64") == {
        arm,
        "armonly-1.0-py3-none-any.whl",
    }
    split_wheelhouse(
        str(house), str(tmp_path / "arm"), ("torch==2.12.0",), "3.11", image_platform="linux/arm64"
    )
    assert sorted(p.name for p in (tmp_path / "arm" / "framework").iterdir()) == sorted(
        [arm, "armonly-1.0-py3-none-any.whl"]
    )
    assert sorted(p.name for p in (tmp_path / "arm" / "user").iterdir()) == ["six-1.17.0-py3-none-any.whl"]


def test_each_platform_gets_uv_for_its_machine(tmp_path: Path, capsys) -> None:
    house = tmp_path / "house"
    tagged(house, "jax", "0.6.2", "manylinux_2_27_x86_64")
    tagged(house, "jax", "0.6.2", "manylinux_2_27_aarch64")
    uv_wheel(house, "x86_64", b"\x7fELF x86_64 uv")
    uv_wheel(house, "aarch64", b"\x7fELF aarch64 uv")
    spec = write_spec(tmp_path, BOTH, installer="uv")
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "--wheelhouse", str(house), "-o", str(out)]) == 0, (
        capsys.readouterr().err
    )
    assert (out / "default" / "amd64" / "uv" / "uv").read_bytes() == b"\x7fELF x86_64 uv"
    assert (out / "default" / "arm64" / "uv" / "uv").read_bytes() == b"\x7fELF aarch64 uv"
    assert [p.name for p in (out / "default" / "arm64" / "wheels" / "framework").iterdir()] == [
        "jax-0.6.2-cp311-cp311-manylinux_2_27_aarch64.whl"
    ]

    next(house.glob("uv-*aarch64.whl")).unlink()
    assert main(["render", "-f", str(spec), "--wheelhouse", str(house), "-o", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "Linux aarch64 wheel there for the linux/arm64 image" in err
    assert "--platform manylinux_2_17_aarch64" in err
    assert not (tmp_path / "o2" / "default").exists()  # nothing of the target is written


def test_the_hosts_uv_goes_only_into_an_image_of_its_machine(tmp_path: Path, capsys) -> None:
    import platform

    if platform.machine() != "x86_64":
        pytest.fail("this test expects an x86_64 host (the CI machines are)")
    # an arm64 image without a wheelhouse fetches uv's aarch64 wheel: tests/integration/test_uv_fetch.py
    assert (
        main(["render", "-f", str(write_spec(tmp_path, "", installer="uv")), "-o", str(tmp_path / "o")]) == 0
    )
