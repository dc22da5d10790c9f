"""Hostile image layers and wheels, made here, through the real `envbuild audit` (issue 33, archives).

Layers are served by a registry-shaped server on loopback and audited as `REPO@sha256:...`; wheels
are audited as files. The CLI runs in a subprocess under resource limits far below what the archive
unpacks to (RLIMIT_AS for memory, RLIMIT_FSIZE for any one file written), with TMPDIR in the test's
own directory, so each case shows the refusal came first, bounded, and left nothing behind:
- a GNU sparse member (made by `tar --sparse` from a file made with truncate: 145 bytes that unpack
  to 4 GiB) and a gzip bomb (1 MiB gzip members of zeros, concatenated) are refused by the ratio;
- overlapping zip entries and a wheel of zeros are refused from the central directory;
- a member under a file of its own archive (`x.so`, `x.so/y.so`) and a 303-character file name are
  clear errors, where audit crashed; across layers the directory replaces the file, as overlayfs does;
- a `libtorch_cuda.so` that is a symbolic link to a file of another name is judged by that file:
  a library cuobjdump reads nothing of (tests/helpers/audit.with_fatbin), or the real jax-cuda12-plugin
  `_linalg.so` (no sm_37 SASS), now fail the audit; before, the link was never judged and it passed;
- a local image's per-layer facts (envbuild.image.layerfacts.compose, built here) resolve such a link
  to another layer's file in the merged filesystem: through a lower layer's directory link, not past a
  whiteout, an opaque directory or a file above, not in a loop; one no reader reaches is unreadable.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._util import limits
from envbuild.audit.kernels import Kernels
from envbuild.cli.app import main
from envbuild.image.layerfacts import LayerFacts, compose, reads_needed
from tests.helpers.audit import plain_elf, with_fatbin
from tests.helpers.pypi import pypi_wheel
from tests.helpers.registry import LoopbackServer, RegistryHandler

REPO = Path(__file__).resolve().parents[2]
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEMORY = 1 << 30  # RLIMIT_AS of the audit: a quarter of the sparse layer, and of the gzip bomb
WRITTEN = 96 << 20  # RLIMIT_FSIZE: no file the audit writes may pass this (the ratio floor is 64 MiB)
TORCH = "opt/venv/lib/python3.11/site-packages/torch/lib"
NO_KERNEL = "no kernel image is available for execution on the device"


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


class ImageRegistry(LoopbackServer):
    """Serves images (an OCI manifest, a config and gzip layers) under team/img, counting the bytes
    of every blob it sent."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, bytes] = {}
        self.sent = 0
        registry = self

        class Handler(RegistryHandler):
            def do_GET(self) -> None:
                kind, _, digest = self.path.removeprefix("/v2/team/img/").partition("/")
                if kind == "manifests" and digest in registry.manifests:
                    self.reply(200, registry.manifests[digest], digest=digest, media_type=OCI_MANIFEST)
                elif kind == "blobs" and digest in registry.blobs:
                    registry.sent += len(registry.blobs[digest])
                    self.reply(200, registry.blobs[digest], media_type="application/octet-stream")
                else:
                    self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "unknown"}]}')

        super().__init__(Handler)

    def image(self, *layers: bytes) -> str:
        """The reference of a new image with these layer blobs, bottom first."""
        config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers"}}).encode()
        self.blobs[digest_of(config)] = config
        for layer in layers:
            self.blobs[digest_of(layer)] = layer
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": digest_of(config),
                    "size": len(config),
                },
                "layers": [
                    {"mediaType": GZIP_LAYER, "digest": digest_of(layer), "size": len(layer)}
                    for layer in layers
                ],
            }
        ).encode()
        self.manifests[digest_of(manifest)] = manifest
        return f"{self.host}/team/img@{digest_of(manifest)}"


@pytest.fixture
def registry() -> Iterator[ImageRegistry]:
    with ImageRegistry() as server:
        yield server  # type: ignore[misc]


def tar_layer(*entries: tuple[str, str, bytes | str]) -> bytes:
    """A gzip layer: (name, kind, data), kind file | symlink (data: its target) | whiteout."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(data)
                archive.addfile(info)
            else:
                body = data if isinstance(data, bytes) else data.encode()
                info.size = len(body)
                archive.addfile(info, io.BytesIO(body))
    return gzip.compress(buffer.getvalue())


class Audited:
    def __init__(self, done: subprocess.CompletedProcess[str], scratch: Path) -> None:
        self.code = done.returncode
        self.err = done.stderr
        self.out = done.stdout
        self.left = sorted(os.listdir(scratch))


def audit(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Audited:
    """`envbuild audit ARGS` in a subprocess under RLIMIT_AS=MEMORY and RLIMIT_FSIZE=WRITTEN, its
    temporary files under a directory of the test's own (what is left there is `left`)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        resource.setrlimit(resource.RLIMIT_FSIZE, (WRITTEN, WRITTEN))

    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(scratch),
        "ENVBUILD_CACHE_DIR": "",
        "DOCKER_CONFIG": str(tmp_path / "no-docker-config"),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-m", "envbuild", "audit", *args],
        capture_output=True,
        text=True,
        env=environment,
        preexec_fn=bounded,
        timeout=120,
        check=False,
    )
    return Audited(done, scratch)


def clear(result: Audited, code: int, *texts: str) -> None:
    """Exit `code` with every text in the error, no traceback or internal error, nothing left."""
    assert result.code == code, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    for text in texts:
        assert text in result.err, result.err
    assert "fix:" in result.err
    assert result.left == [], result.left


# --- layers: sparse members and gzip bombs ---------------------------------------------------------


def sparse_layer(tmp_path: Path, name: str, size: int) -> bytes:
    """A gzip layer holding `name` as a GNU sparse member of `size` bytes that stores 4 (the ELF
    magic): made by GNU tar from a file made with truncate, which takes no disk."""
    source = tmp_path / "sparse-source"
    path = source / name
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x7fELF")
    os.truncate(path, size)
    done = subprocess.run(
        ["tar", "--sparse", "--format=gnu", "-C", str(source), "-cf", "-", name],
        capture_output=True,
        check=True,
    )
    shutil.rmtree(source)
    return gzip.compress(done.stdout)


def test_a_208_byte_sparse_layer_that_unpacks_to_4_gib_is_refused_at_its_header(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    layer = sparse_layer(tmp_path, f"{TORCH}/libtorch_cuda.so", 4 << 30)
    assert len(layer) < 512  # the 208 bytes, give or take gzip's header
    ref = registry.image(layer)
    result = audit(tmp_path, ref, "--gpu", "H100")
    clear(
        result,
        1,
        f"layer {digest_of(layer)} of {ref} unpacks to 4 GiB from {len(layer)} B",
        f"at member '{TORCH}/libtorch_cuda.so'",
        "ENVBUILD_MAX_UNPACK_RATIO",
    )
    assert registry.sent < 4096  # the config and the 145-byte layer: all the audit fetched


def test_a_sparse_member_not_audited_counts_at_its_size_too(tmp_path: Path, registry: ImageRegistry) -> None:
    layer = sparse_layer(tmp_path, "var/log/lastlog", 4 << 30)
    result = audit(tmp_path, registry.image(layer), "--gpu", "H100")
    clear(result, 1, "unpacks to 4 GiB", "at member 'var/log/lastlog'", "a decompression bomb")


def gzip_bomb(name: str, mebibytes: int) -> bytes:
    """A layer whose one member is `mebibytes` MiB of zeros after the ELF magic, as concatenated gzip
    members (each 1 MiB of zeros, compressed once): a 1 GiB member from about 1 MB."""
    size = mebibytes << 20
    info = tarfile.TarInfo(name)
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    zeros = gzip.compress(bytes(1 << 20))
    body = gzip.compress(header + b"\x7fELF" + bytes((1 << 20) - 4)) + zeros * (mebibytes - 1)
    return body + gzip.compress(bytes(1024))  # the end-of-archive blocks (size is a block multiple)


def test_a_gzip_bomb_layer_is_refused_before_it_is_unpacked(tmp_path: Path, registry: ImageRegistry) -> None:
    layer = gzip_bomb(f"{TORCH}/libtorch_cuda.so", 4096)  # 4 GiB of zeros from 4 MiB
    ref = registry.image(layer)
    result = audit(tmp_path, ref, "--gpu", "H100")
    clear(result, 1, f"layer {digest_of(layer)} of {ref} unpacks to", "a decompression bomb", "UNPACK_RATIO")
    assert "the limit is 200:1 past the first 64 MiB" in result.err
    unpacked = re.search(r"unpacks to ([\d.]+) MiB from", result.err)
    assert unpacked is not None and float(unpacked.group(1)) < 66  # stopped at the floor, not at 4 GiB


def test_the_unpack_total_and_one_members_bytes_are_bounds_with_their_variables(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    elf = plain_elf(tmp_path / "build" / "libplain.so").read_bytes()
    ref = registry.image(tar_layer((f"{TORCH}/libc10_cuda.so", "file", elf)))
    total = audit(tmp_path, ref, "--gpu", "H100", env={"ENVBUILD_MAX_UNPACK_BYTES": "4096"})
    clear(total, 1, "unpacks to more than 4 KiB (the unpack limit)", "ENVBUILD_MAX_UNPACK_BYTES")
    member = audit(tmp_path, ref, "--gpu", "H100", env={"ENVBUILD_MAX_MEMBER_BYTES": "4096"})
    clear(member, 1, f"member '{TORCH}/libc10_cuda.so' is", "ENVBUILD_MAX_MEMBER_BYTES")


def test_a_path_longer_than_path_max_is_refused(tmp_path: Path, registry: ImageRegistry) -> None:
    name = "/".join(["d" * 200] * 25) + "/libdeep.so"  # 5,000+ characters, each part legal
    result = audit(tmp_path, registry.image(tar_layer((name, "file", b"\x7fELF"))), "--gpu", "H100")
    clear(result, 1, "characters long (at most 4,096, Linux's PATH_MAX)")


# --- layers: what crashed audit ------------------------------------------------------------------


def test_a_303_character_file_name_is_a_clear_error(tmp_path: Path, registry: ImageRegistry) -> None:
    name = "usr/lib/lib" + "x" * 297 + ".so"  # a 303-character file name
    result = audit(tmp_path, registry.image(tar_layer((name, "file", b"\x7fELF"))), "--gpu", "H100")
    clear(result, 1, "303-character file name (at most 255 bytes, Linux's NAME_MAX)")


def test_a_library_under_a_library_of_the_same_layer_is_a_clear_error(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    elf = plain_elf(tmp_path / "build" / "libplain.so").read_bytes()
    layer = tar_layer(("usr/lib/x.so", "file", elf), ("usr/lib/x.so/y.so", "file", elf))
    result = audit(tmp_path, registry.image(layer), "--gpu", "H100")
    clear(result, 1, "holds 'usr/lib/x.so/y.so' under 'usr/lib/x.so', a file (not a directory)")


def test_across_layers_the_directory_replaces_the_file_as_overlayfs_shows_it(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    elf = plain_elf(tmp_path / "build" / "libplain.so").read_bytes()
    ref = registry.image(
        tar_layer(("usr/lib/x.so", "file", elf)), tar_layer(("usr/lib/x.so/y.so", "file", elf))
    )
    result = audit(tmp_path, ref, "--gpu", "H100", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["without_device_code"] == ["usr/lib/x.so/y.so"]
    assert result.left == []


# --- layers and directories: a library known by name, linked to a file of another name ----------


def unreadable_library(tmp_path: Path) -> bytes:
    """A real ELF with a `.nv_fatbin` that is no fatbin: cuobjdump lists nothing of it, so a library
    that decides the audit fails it (unreadable) as soon as it is judged."""
    base = plain_elf(tmp_path / "build" / "base.so")
    return with_fatbin(base, tmp_path / "build" / "fatbin.bin", b"no fatbin here " * 64).read_bytes()


def test_a_libtorch_cuda_symlink_is_judged_by_its_target_and_fails(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    """Before issue 33 the link was skipped and its target (not a shared object's name) never read:
    exit 0 with nothing judged. Now the loader's view is judged: the library cuobjdump cannot read
    decides, and the audit fails naming it."""
    layer = tar_layer(
        (f"{TORCH}/libtorch_cuda.blob", "file", unreadable_library(tmp_path)),
        (f"{TORCH}/libtorch_cuda.so", "symlink", "libtorch_cuda.blob"),
    )
    result = audit(tmp_path, registry.image(layer), "--gpu", "H100", "--json")
    assert result.code == 1, result.err
    report = json.loads(result.out)
    assert [library["library"] for library in report["unreadable"]] == [f"{TORCH}/libtorch_cuda.so"]
    assert report["framework"] == "torch"
    assert result.left == []


def test_a_link_in_a_later_layer_follows_an_absolute_target_and_a_whiteout_ends_it(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    blob = tar_layer(("srv/blobs/kernels.bin", "file", unreadable_library(tmp_path)))
    link = tar_layer((f"{TORCH}/libtorch_cuda.so", "symlink", "/srv/blobs/kernels.bin"))
    judged = audit(tmp_path, registry.image(blob, link), "--gpu", "H100", "--json")
    assert (
        judged.code == 1 and json.loads(judged.out)["unreadable"][0]["library"] == f"{TORCH}/libtorch_cuda.so"
    )
    deleted = tar_layer(("srv/blobs/.wh.kernels.bin", "file", b""))
    gone = audit(tmp_path, registry.image(blob, link, deleted), "--gpu", "H100", "--json")
    assert gone.code == 0, gone.err  # a dangling link: the loader loads nothing, nothing to judge
    assert json.loads(gone.out)["libraries"] == []


def test_a_link_never_leads_outside_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kernels.bin").write_bytes(unreadable_library(tmp_path))
    tree = tmp_path / "tree" / "torch" / "lib"
    tree.mkdir(parents=True)
    (tree / "libtorch_cuda.so").symlink_to(outside / "kernels.bin")  # absolute: outside the directory
    (tree / "libtorch_cuda_linalg.so").symlink_to("../../../outside/kernels.bin")  # climbs out
    result = audit(tmp_path, str(tmp_path / "tree"), "--gpu", "H100", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["libraries"] == []


def test_a_symlinked_library_in_a_directory_is_judged_by_its_target(tmp_path: Path) -> None:
    tree = tmp_path / "tree" / "torch" / "lib"
    tree.mkdir(parents=True)
    (tree / "libtorch_cuda.so.2").write_bytes(unreadable_library(tmp_path))  # not a name torch counts
    (tree / "libtorch_cuda.so").symlink_to("libtorch_cuda.so.2")
    result = audit(tmp_path, str(tmp_path / "tree"), "--gpu", "H100", "--json")
    assert result.code == 1, result.err
    report = json.loads(result.out)
    assert [library["library"] for library in report["unreadable"]] == ["torch/lib/libtorch_cuda.so"]


@pytest.fixture(scope="session")
def jax_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pypi_wheel("jax-cuda12-plugin==0.10.2", tmp_path_factory.mktemp("pypi"))


@pytest.mark.pypi
def test_a_symlinked_jax_plugin_without_kernels_for_the_gpu_fails(
    tmp_path: Path, registry: ImageRegistry, jax_plugin: Path
) -> None:
    """The real jax-cuda12-plugin 0.10.2 `_linalg.so` (SASS sm_50 to sm_120, none for sm_37), stored
    under another name and linked: a Tesla K80 has no kernel image in it, and the audit says so."""
    with zipfile.ZipFile(jax_plugin) as wheel:
        linalg = wheel.read("jax_cuda12_plugin/_linalg.so")
    site = "opt/venv/lib/python3.11/site-packages/jax_cuda12_plugin"
    layer = tar_layer(
        (f"{site}/.linalg-real", "file", linalg), (f"{site}/_linalg.so", "symlink", ".linalg-real")
    )
    result = audit(tmp_path, registry.image(layer), "--gpu", "Tesla K80")
    assert result.code == 1, result.err
    assert f"error: Tesla K80: {NO_KERNEL} ({site}/_linalg.so)" in result.out + result.err
    assert result.left == []


# --- wheels ---------------------------------------------------------------------------------------


def overlapping_wheel(path: Path, copies: int) -> Path:
    """The overlapping-entries zip bomb: one deflated member of zeros, and `copies` central directory
    entries under other names that all point at its data."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb/lib0.so", bytes(8 << 20))
    data = path.read_bytes()
    end = data.rindex(b"PK\x05\x06")
    central = data[int.from_bytes(data[end + 16 : end + 20], "little") : end]
    name_length = int.from_bytes(central[28:30], "little")
    entries = [central]
    for number in range(1, copies):
        name = f"bomb/lib{number}.so".encode()
        entries.append(
            central[:28]
            + len(name).to_bytes(2, "little")
            + central[30:46]
            + name
            + central[46 + name_length :]
        )
    directory = b"".join(entries)
    offset = int.from_bytes(data[end + 16 : end + 20], "little")
    tail = (
        b"PK\x05\x06" + bytes(4) + copies.to_bytes(2, "little") * 2 + len(directory).to_bytes(4, "little")
        + offset.to_bytes(4, "little") + bytes(2)
    )  # fmt: skip
    path.write_bytes(data[:offset] + directory + tail)
    return path


def test_overlapping_zip_entries_are_refused_outright(tmp_path: Path) -> None:
    wheel = overlapping_wheel(tmp_path / "bomb-1.0-py3-none-any.whl", 600)  # 4.7 GiB declared, 9 KiB
    assert len(zipfile.ZipFile(wheel).infolist()) == 600
    result = audit(tmp_path, str(wheel), "--gpu", "H100")
    clear(result, 2, f"audit {wheel}: members 'bomb/lib0.so' and 'bomb/lib1.so' overlap", "a zip bomb")


def test_a_wheel_of_zeros_is_refused_from_its_central_directory(tmp_path: Path) -> None:
    wheel = tmp_path / "zeros-1.0-py3-none-any.whl"
    with (
        zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("zeros/libzero.so", "w") as out,
    ):
        out.write(b"\x7fELF")
        chunk = bytes(1 << 20)
        for _ in range(300):  # 300 MiB of zeros: about 300 KB in the wheel
            out.write(chunk)
    result = audit(tmp_path, str(wheel), "--gpu", "H100")
    clear(result, 2, f"audit {wheel} unpacks to 300 MiB from", "a zip bomb", "ENVBUILD_MAX_UNPACK_RATIO")


def test_a_wheel_member_over_the_member_bound_names_it_and_its_variable(tmp_path: Path) -> None:
    wheel = tmp_path / "plain-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(plain_elf(tmp_path / "build" / "libplain.so"), "plain/libplain.so")
    result = audit(tmp_path, str(wheel), "--gpu", "H100", env={"ENVBUILD_MAX_MEMBER_BYTES": "4096"})
    clear(result, 2, "member 'plain/libplain.so' is", "ENVBUILD_MAX_MEMBER_BYTES")


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["plain/lib" + "x" * 292 + ".so"], "or a file name over 255 bytes"),
        (
            ["plain/x.so", "plain/x.so/y.so"],
            "member 'plain/x.so/y.so' is under 'plain/x.so', which is a file",
        ),
    ],
    ids=["303-character-name", "file-and-member-under-it"],
)
def test_wheel_members_that_crashed_audit_are_clear_errors(
    tmp_path: Path, names: list[str], expected: str
) -> None:
    wheel = tmp_path / "odd-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in names:
            archive.writestr(name, b"\x7fELF")
    result = audit(tmp_path, str(wheel), "--gpu", "H100")
    clear(result, 2, f"audit {wheel}: member", expected)


def test_a_wheel_past_the_entries_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ARCHIVE_ENTRIES (a million) has no override: the bound is lowered here, in process, rather than
    writing a million members."""
    monkeypatch.setattr(limits, "ARCHIVE_ENTRIES", limits.ARCHIVE_ENTRIES.replace(default=50))
    wheel = tmp_path / "many-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for number in range(51):
            archive.writestr(f"many/f{number}.txt", b"")
    assert main(["audit", str(wheel), "--gpu", "H100"]) == 2
    assert f"error: audit {wheel} has 51 members (the entries limit is 50)" in capsys.readouterr().err


def test_a_link_and_its_target_in_one_layer_stay_judged_alike_by_every_reader(
    tmp_path: Path, registry: ImageRegistry
) -> None:
    """The local Engine's readers keep facts per layer (docker save, and the Engine's overlay2 layer
    directories): a link whose target is in its own layer is judged by it there too; a later layer's
    whiteout of the target leaves a link the loader cannot load, judged by nobody."""
    from envbuild.image.layers import Layers
    from envbuild.image.storage import read_directory

    library = unreadable_library(tmp_path)
    one = tar_layer(
        (f"{TORCH}/libtorch_cuda.blob", "file", library),
        (f"{TORCH}/libtorch_cuda.so", "symlink", "libtorch_cuda.blob"),
    )
    layers = Layers(str(tmp_path / "layers"))
    layers.read("sha256:one", io.BytesIO(one), "test-image")
    assert Path(layers.changes["sha256:one"].added[f"{TORCH}/libtorch_cuda.so"]).read_bytes() == library
    diff = tmp_path / "diff" / TORCH
    diff.mkdir(parents=True)
    (diff / "libtorch_cuda.blob").write_bytes(library)
    (diff / "libtorch_cuda.so").symlink_to("libtorch_cuda.blob")
    (diff / "libc10.so").symlink_to("/etc/passwd")  # named like a library, leads out of the layer: ignored
    changes = read_directory(str(tmp_path / "diff"))
    assert changes.added == {f"{TORCH}/libtorch_cuda.so": str(diff / "libtorch_cuda.blob")}
    deleted = tar_layer((f"{TORCH}/.wh.libtorch_cuda.blob", "file", b""))
    result = audit(tmp_path, registry.image(one, deleted), "--gpu", "H100", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["libraries"] == []
    assert result.left == []


def test_a_file_after_a_directory_of_its_own_layer_replaces_it_as_the_engines_unpack_it(
    tmp_path: Path,
) -> None:
    """`x.so/y.so` then `x.so`: Docker and containerd remove the directory and write the file."""
    from envbuild.image.layers import Layers

    elf = plain_elf(tmp_path / "build" / "libplain.so").read_bytes()
    layers = Layers(str(tmp_path / "layers"))
    layers.read(
        "sha256:one",
        io.BytesIO(tar_layer(("usr/lib/x.so/y.so", "file", elf), ("usr/lib/x.so", "file", elf))),
        "img",
    )
    root = tmp_path / "root"
    root.mkdir()
    assert layers.extract(["sha256:one"], str(root)) == 1
    assert (root / "usr/lib/x.so").is_file()


def test_a_layer_past_the_entries_bound_is_refused_naming_the_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for wheels, ARCHIVE_ENTRIES is lowered in process rather than writing a million members."""
    from envbuild.errors import EnvbuildError
    from envbuild.image.layers import Layers

    monkeypatch.setattr(limits, "ARCHIVE_ENTRIES", limits.ARCHIVE_ENTRIES.replace(default=50))
    layer = tar_layer(*((f"etc/f{number}", "file", b"") for number in range(51)))
    with pytest.raises(
        EnvbuildError, match=r"layer sha256:many of img has more than 50 members .* 'etc/f50'"
    ):
        Layers(str(tmp_path / "layers")).read("sha256:many", io.BytesIO(layer), "img")


# --- links across layers, as the per-layer facts of a local image compose them ----------------------

KERNELS = Kernels(sass=("sm_80",), ptx=(), size=4096)


def facts(
    *,
    links: dict[str, str] | None = None,
    files: tuple[str, ...] = (),
    objects: dict[str, Kernels] | None = None,
    deleted: tuple[str, ...] = (),
    opaque: tuple[str, ...] = (),
) -> LayerFacts:
    """One layer's facts as storage.read_directory and Layers give them: links and files replace."""
    return LayerFacts(
        deleted=frozenset(deleted),
        opaque=frozenset(opaque),
        replaced=frozenset((*files, *(links or {}))),
        objects=dict(objects or {}),
        links=dict(links or {}),
    )


class Reads:
    """A reader compose calls for a target that is no judged object: it records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def __call__(self, target: str, index: int) -> Kernels:
        self.asked.append((target, index))
        return KERNELS


BLOB = facts(files=("opt/blobs/kernels.bin",))
LINK = f"{TORCH}/libtorch_cuda.so"


def test_a_link_to_a_lower_layers_file_is_judged_by_that_file() -> None:
    reads = Reads()
    composed = compose([BLOB, facts(links={LINK: "/opt/blobs/kernels.bin"})], reads)
    assert composed == {LINK: KERNELS} and reads.asked == [("opt/blobs/kernels.bin", 0)]
    assert reads_needed([BLOB, facts(links={LINK: "/opt/blobs/kernels.bin"})]) == reads.asked


def test_a_relative_target_through_a_lower_layers_directory_link_and_dotdot_past_the_root() -> None:
    layers = [
        BLOB,
        facts(links={"opt/kernels": "blobs"}),
        facts(links={LINK: "../../../../../../../../../../opt/kernels/kernels.bin"}),  # `..` stops at /
    ]
    reads = Reads()
    assert compose(layers, reads) == {LINK: KERNELS} and reads.asked == [("opt/blobs/kernels.bin", 0)]


@pytest.mark.parametrize(
    "above",
    [
        facts(deleted=("opt/blobs/kernels.bin",)),  # the target whited out
        facts(deleted=("opt/blobs",)),  # its directory whited out
        facts(opaque=("opt/blobs",), files=("opt/blobs/other",)),  # an opaque directory hides it
        facts(files=("opt/blobs",)),  # a file over its directory
        facts(files=("opt/blobs/kernels.bin/x",)),  # a directory over it
    ],
    ids=["whiteout", "whiteout-of-its-directory", "opaque", "file-over-directory", "directory-over-it"],
)
def test_a_target_a_higher_layer_hid_is_not_judged_and_not_read(above: LayerFacts) -> None:
    reads = Reads()
    layers = [BLOB, facts(links={LINK: "/opt/blobs/kernels.bin"}), above]
    assert compose(layers, reads) == {} and reads.asked == [] and reads_needed(layers) == []


def test_a_whited_out_directory_link_of_a_lower_layer_ends_the_resolution() -> None:
    layers = [
        BLOB,
        facts(links={"opt/kernels": "blobs"}),
        facts(deleted=("opt/kernels",)),
        facts(links={LINK: "/opt/kernels/kernels.bin"}),
    ]
    assert compose(layers, Reads()) == {}


def test_a_link_loop_and_a_link_replaced_above_are_not_judged() -> None:
    reads = Reads()
    loop = facts(links={LINK: "/opt/a", "opt/a": "/opt/b", "opt/b": f"/{LINK}"})
    assert compose([BLOB, loop], reads) == {} and reads.asked == []
    replaced = [BLOB, facts(links={LINK: "/opt/blobs/kernels.bin"}), facts(deleted=(LINK,))]
    assert compose(replaced, reads) == {} and reads.asked == []


def test_a_target_that_is_a_judged_object_is_not_read_again_and_its_bytes_count_once() -> None:
    """libtorch_cuda.so -> libtorch_cuda.so.2 across layers: the framework counts only the link's name,
    so the link is judged, by the kernels its target was read with."""
    target = f"{TORCH}/libtorch_cuda.so.2"
    reads = Reads()
    composed = compose([facts(objects={target: KERNELS}), facts(links={LINK: "libtorch_cuda.so.2"})], reads)
    assert composed == {target: KERNELS, LINK: KERNELS.replace(size=0)} and reads.asked == []


def test_the_usual_versioned_link_across_layers_stays_one_library() -> None:
    library = "usr/lib/libcudart.so.12"
    layers = [facts(objects={library: KERNELS}), facts(links={"usr/lib/libcudart.so": "libcudart.so.12"})]
    assert compose(layers, Reads()) == {library: KERNELS}


def test_a_target_no_reader_can_reach_is_refused_as_unreadable_with_the_skip_fix() -> None:
    """The docker save read with no export left: the audit cannot judge the link, so it refuses it as
    any library it could not read, with the --skip-audit that builds anyway."""
    from envbuild.audit.tree import judge_tree, unreadable_fix

    composed = compose([BLOB, facts(links={LINK: "/opt/blobs/kernels.bin"})])
    assert composed[LINK].not_read and "/opt/blobs/kernels.bin" in (composed[LINK].unread or "")
    audit = judge_tree(composed, (), target="image", framework="torch")
    assert not audit.ok and [library.path for library in audit.unreadable] == [LINK]
    assert '--skip-audit libtorch_cuda.so="REASON"' in unreadable_fix(audit.unreadable)


def test_a_link_read_with_its_own_layer_keeps_those_kernels_unless_a_lower_link_redirects_it() -> None:
    own = facts(links={LINK: "/opt/blobs/kernels.bin"}, files=("opt/blobs/kernels.bin",))
    own = own.replace(objects={LINK: KERNELS})  # what read_layer gives a link to a file of its own layer
    reads = Reads()
    assert compose([own], reads) == {LINK: KERNELS} and reads.asked == []
    redirected = facts(links={"opt/blobs": "/srv"}, files=("srv/kernels.bin",))
    assert compose([redirected, own], reads) == {LINK: KERNELS} and reads.asked == []  # own dir wins


def test_many_links_to_one_file_read_it_once_and_count_its_bytes_once() -> None:
    names = [f"{TORCH}/libtorch_cuda_{n}.so" for n in range(50)]
    reads = Reads()
    composed = compose([BLOB, facts(links=dict.fromkeys(names, "/opt/blobs/kernels.bin"))], reads)
    assert reads.asked == [("opt/blobs/kernels.bin", 0)]
    assert sorted(composed) == sorted(names) and sum(k.size or 0 for k in composed.values()) == KERNELS.size


def test_a_link_and_its_target_of_one_layer_keep_the_bytes_counted_once() -> None:
    """read_layer gave the link its file's bytes and the target (a further name of it) none: compose
    keeps that, rather than count the file zero times."""
    target = f"{TORCH}/libtorch_cuda.so.2"
    layer = facts(
        links={LINK: "libtorch_cuda.so.2"}, objects={target: KERNELS.replace(size=0), LINK: KERNELS}
    )
    composed = compose([layer], Reads())
    assert composed == {LINK: KERNELS, target: KERNELS.replace(size=0)}
