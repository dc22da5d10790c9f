"""An image's shared objects rebuilt from its layer tarballs (envbuild.image.layers): the OCI whiteout
rules, replacements, hard links and hostile member names, on layers written here with tarfile."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from envbuild.errors import EnvbuildError
from envbuild.image.layers import Layers

ELF = b"\x7fELF" + b"\x02\x01\x01" + bytes(57)  # the magic is all Layers looks at


def layer(*entries: tuple[str, str, bytes | str], compression: str = "") -> io.BytesIO:
    """A layer tarball: (name, kind, data) with kind file | dir | symlink | hardlink (data: the target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:" + compression) as archive:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif kind in ("symlink", "hardlink"):
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = str(data)
                archive.addfile(info)
            else:
                body = data if isinstance(data, bytes) else data.encode()
                info.size = len(body)
                archive.addfile(info, io.BytesIO(body))
    buffer.seek(0)
    return buffer


def rebuilt(tmp_path: Path, *layers: io.BytesIO) -> set[str]:
    collected = Layers(str(tmp_path / "scratch"))
    for number, stream in enumerate(layers):
        collected.read(f"layer{number}", stream, "test-image")
    root = tmp_path / "root"
    root.mkdir()
    collected.extract([f"layer{n}" for n in range(len(layers))], str(root))
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
    }


def base() -> io.BytesIO:
    return layer(
        ("usr/", "dir", b""),
        ("usr/lib/", "dir", b""),
        ("usr/lib/libkeep.so", "file", ELF),
        ("usr/lib/libgone.so.12", "file", ELF),
        ("usr/lib/README.so.txt", "file", ELF),  # not a shared object's name
        ("usr/lib/libtext.so", "file", b"INPUT(libtext.so.1)\n"),  # a linker script, not ELF
        ("./opt/pkg/plugin/_kernels.so", "file", ELF),
        ("opt/pkg/plugin/_other.so", "file", ELF),
        ("opt/swap/libswap.so", "file", ELF),
    )


def test_the_base_layer_gives_its_elf_shared_objects_only(tmp_path: Path) -> None:
    assert rebuilt(tmp_path, base()) == {
        "usr/lib/libkeep.so",
        "usr/lib/libgone.so.12",
        "opt/pkg/plugin/_kernels.so",
        "opt/pkg/plugin/_other.so",
        "opt/swap/libswap.so",
    }


def test_a_whiteout_deletes_a_library_and_a_directory_of_the_layers_below(tmp_path: Path) -> None:
    upper = layer(("usr/lib/.wh.libgone.so.12", "file", b""), ("opt/.wh.pkg", "file", b""))
    assert rebuilt(tmp_path, base(), upper) == {"usr/lib/libkeep.so", "opt/swap/libswap.so"}


def test_an_opaque_directory_hides_the_layers_below_but_not_its_own_layer(tmp_path: Path) -> None:
    upper = layer(
        ("opt/pkg/plugin/_new.so", "file", ELF),  # before the marker in the tar: order must not matter
        ("opt/pkg/plugin/.wh..wh..opq", "file", b""),
    )
    assert rebuilt(tmp_path, base(), upper) == {
        "usr/lib/libkeep.so",
        "usr/lib/libgone.so.12",
        "opt/pkg/plugin/_new.so",
        "opt/swap/libswap.so",
    }


def test_a_symlink_or_a_file_over_a_library_or_its_directory_replaces_it(tmp_path: Path) -> None:
    upper = layer(
        ("usr/lib/libgone.so.12", "symlink", "libkeep.so"),  # a library replaced by a symlink
        ("opt/swap", "symlink", "/elsewhere"),  # a directory of libraries replaced by a symlink
        ("opt/pkg/plugin/_other.so", "file", b"not ELF any more"),
    )
    assert rebuilt(tmp_path, base(), upper) == {"usr/lib/libkeep.so", "opt/pkg/plugin/_kernels.so"}


def test_a_later_layer_rewrites_a_library_and_a_hard_link_gets_its_bytes(tmp_path: Path) -> None:
    newer = ELF + b"newer"
    upper = layer(
        ("usr/lib/libkeep.so", "file", newer),
        ("usr/lib/libalias.so", "hardlink", "usr/lib/libkeep.so"),
        compression="gz",
    )
    rebuilt(tmp_path, base(), upper)
    assert (tmp_path / "root/usr/lib/libkeep.so").read_bytes() == newer
    assert (tmp_path / "root/usr/lib/libalias.so").read_bytes() == newer


def test_member_names_that_climb_out_of_the_image_stay_inside_it(tmp_path: Path) -> None:
    hostile = layer(
        ("../../escape.so", "file", ELF),
        ("/abs/libabs.so", "file", ELF),  # absolute and climbing names: inside the image root
        ("usr/../../../up.so", "file", ELF),
    )
    assert rebuilt(tmp_path, hostile) == {"abs/libabs.so", "escape.so", "up.so"}
    assert not (tmp_path / "escape.so").exists() and not (tmp_path.parent / "escape.so").exists()


def test_a_layer_that_is_not_a_tar_archive_is_an_error_naming_it(tmp_path: Path) -> None:
    collected = Layers(str(tmp_path / "scratch"))
    with pytest.raises(EnvbuildError, match=r"layer sha256:abc of test-image is not a readable tar archive"):
        collected.read("sha256:abc", io.BytesIO(b"GIF89a" + bytes(600)), "test-image")
