"""Issue 32: an audit reads a layer it has not seen from the Engine's overlay2 directories instead of a
`docker save` of the whole image, and composes the image from per-layer facts. The directories here are
real overlay2 layouts (a 0/0 character device for a whiteout, the trusted.overlay.opaque xattr), made
with mknod and setxattr as dockerd makes them; the same changes as layer tarballs go through the tar
reader, and both must give the image the same libraries."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from envbuild.audit.kernels import Kernels
from envbuild.image import storage
from envbuild.image.layerfacts import LayerFacts, compose
from envbuild.image.layers import Layers

ELF = b"\x7fELF" + b"\0" * 60


def _tar(entries: dict[str, bytes | None]) -> bytes:
    """A layer tarball: name -> bytes (a file) or None (a directory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


LOWER = {
    "usr/lib/libgone.so.1": ELF,
    "usr/lib/libkept.so.2": ELF,
    "opt/venv/lib/libhidden.so": ELF,
    "opt/venv/lib/notes.txt": b"plain",
}
UPPER_TAR = {"usr/lib/.wh.libgone.so.1": b"", "opt/venv/.wh..wh..opq": b"", "opt/venv/lib/libnew.so": ELF}


def _overlay_dir(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.fixture
def upper_dir(tmp_path: Path) -> Path:
    """UPPER_TAR as dockerd's overlay2 stores it."""
    root = _overlay_dir(tmp_path / "upper" / "diff", {"opt/venv/lib/libnew.so": ELF})
    (root / "usr" / "lib").mkdir(parents=True)
    try:
        os.mknod(root / "usr" / "lib" / "libgone.so.1", 0o600 | 0o020000, os.makedev(0, 0))
        os.setxattr(root / "opt" / "venv", "trusted.overlay.opaque", b"y")
    except PermissionError:
        pytest.skip("mknod and trusted xattrs need root (dockerd's storage is root's)")
    return root


def _facts(changes: storage.Changes) -> LayerFacts:
    """The layer's facts with a stand-in verdict per library (its kernels are not the point here)."""
    return LayerFacts(
        deleted=frozenset(changes.deleted),
        opaque=frozenset(changes.opaque),
        replaced=frozenset(changes.replaced - set(changes.added)),
        objects={path: Kernels(sass=("sm_90",), ptx=()) for path in changes.added},
    )


def test_an_overlay2_directory_makes_the_changes_its_tarball_makes(tmp_path: Path, upper_dir: Path) -> None:
    lower_dir = _overlay_dir(tmp_path / "lower" / "diff", LOWER)
    from_dirs = compose([_facts(storage.read_directory(str(d))) for d in (lower_dir, upper_dir)])
    layers = Layers(str(tmp_path / "scratch"))
    layers.read("lower", io.BytesIO(_tar(LOWER)), "test")
    layers.read("upper", io.BytesIO(_tar(UPPER_TAR)), "test")
    from_tars = layers.survivors(["lower", "upper"])
    assert sorted(from_dirs) == sorted(from_tars) == ["opt/venv/lib/libnew.so", "usr/lib/libkept.so.2"]


def test_a_symlinked_directory_is_a_replacement_and_never_followed(tmp_path: Path) -> None:
    outside = _overlay_dir(tmp_path / "outside", {"libsecret.so": ELF})
    layer = tmp_path / "layer" / "diff"
    (layer / "usr").mkdir(parents=True)
    (layer / "usr" / "lib").symlink_to(outside)
    changes = storage.read_directory(str(layer))
    assert changes.added == {} and changes.replaced == {"usr/lib"}
    below = _overlay_dir(tmp_path / "low", {"usr/lib/liba.so": ELF})
    lower = _facts(storage.read_directory(str(below)))
    assert compose([lower, _facts(changes)]) == {}  # the link replaced the directory below


def test_only_elf_shared_objects_are_read(tmp_path: Path) -> None:
    layer = _overlay_dir(tmp_path / "d", {"a/libreal.so.1": ELF, "a/libfake.so": b"#!/bin/sh", "a/x.py": ELF})
    assert set(storage.read_directory(str(layer)).added) == {"a/libreal.so.1"}


def _data_root(tmp_path: Path, count: int) -> tuple[Path, list[str]]:
    """A data root laid out as dockerd's overlay2: <id>/diff, <id>/link, l/<link> -> ../<id>/diff."""
    root = tmp_path / "docker"
    (root / "overlay2" / "l").mkdir(parents=True)
    directories = []
    for number in range(count):
        layer = root / "overlay2" / f"layer{number}"
        (layer / "diff").mkdir(parents=True)
        (layer / "link").write_text(f"LINK{number}")
        (root / "overlay2" / "l" / f"LINK{number}").symlink_to(f"../layer{number}/diff")
        directories.append(str(layer / "diff"))
    return root, directories


def _attrs(directories: list[str]) -> dict:
    lower = ":".join(reversed(directories[:-1])) or None
    data = {"UpperDir": directories[-1], **({"LowerDir": lower} if lower else {})}
    return {"GraphDriver": {"Name": "overlay2", "Data": data}}


DIFF_IDS = [f"sha256:{n * 64}" for n in "abc"]


def test_the_engines_directories_are_taken_bottom_first(tmp_path: Path) -> None:
    root, directories = _data_root(tmp_path, 3)
    assert storage.layer_directories(_attrs(directories), DIFF_IDS, str(root)) == directories


@pytest.mark.parametrize("why", ["driver", "count", "outside", "link", "no-root", "forced"])
def test_directories_that_cannot_be_trusted_fall_back_to_docker_save(
    tmp_path: Path, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, directories = _data_root(tmp_path, 3)
    attrs, diff_ids, data_root = _attrs(directories), DIFF_IDS, str(root)
    if why == "driver":
        attrs["GraphDriver"]["Name"] = "fuse-overlayfs"
    elif why == "count":
        diff_ids = DIFF_IDS[:2]
    elif why == "outside":  # a directory of the right shape under another root
        _, elsewhere = _data_root(tmp_path / "other", 1)
        attrs = _attrs([*directories[:2], elsewhere[0]])
    elif why == "link":  # the short link points at another layer's directory
        (root / "overlay2" / "layer2" / "link").write_text("LINK0")
    elif why == "no-root":
        data_root = None
    else:
        monkeypatch.setenv("ENVBUILD_AUDIT_READ", "save")
    assert storage.layer_directories(attrs, diff_ids, data_root) is None


def _gzip_members(*parts: bytes) -> bytes:
    """Each part gzip-compressed on its own, the members concatenated: how eStargz (and `cat a.gz
    b.gz`) lays out one layer, which Docker, containerd and GNU tar read to the last member."""
    import gzip

    return b"".join(gzip.compress(part) for part in parts)


def test_every_gzip_member_of_a_layer_is_read(tmp_path: Path) -> None:
    """Issue 33: tarfile's own gzip reader stopped at the end of the first member, so a library in the
    second was never audited (and a planted package never inventoried)."""
    whole = _tar({"usr/lib/libfirst.so": ELF, "opt/hidden/libsecond.so": ELF})
    cut = whole.index(b"opt/hidden/libsecond.so") // 512 * 512  # the second entry's header starts there
    layer = _gzip_members(whole[:cut], whole[cut:])
    layers = Layers(str(tmp_path / "scratch"))
    layers.read("layer", io.BytesIO(layer), "test")
    assert sorted(layers.survivors(["layer"])) == ["opt/hidden/libsecond.so", "usr/lib/libfirst.so"]
    # what tarfile alone makes of the same bytes: the first member only
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r|*") as archive:
        assert [member.name for member in archive] == ["usr/lib/libfirst.so"]


def test_a_zstd_layer_is_refused_by_its_magic_and_a_broken_gzip_is_a_clear_error(tmp_path: Path) -> None:
    from envbuild.errors import EnvbuildError

    layers = Layers(str(tmp_path / "scratch"))
    with pytest.raises(EnvbuildError) as raised:
        layers.read("z", io.BytesIO(b"\x28\xb5\x2f\xfd" + b"\0" * 64), "test")
    assert "zstd" in raised.value.message and "gzip" in raised.value.fix
    with pytest.raises(EnvbuildError) as raised:
        layers.read("g", io.BytesIO(_gzip_members(_tar(LOWER))[:-20]), "test")
    assert "is not a readable tar archive" in raised.value.message
