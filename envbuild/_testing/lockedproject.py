"""A locked project whose every file lives on loopback services, made without a resolution.

`envbuild vendor`, `doctor --bundle` and their benchmark need a lock that names wheels on a loopback
index, files on a loopback conda channel and a base image on a loopback registry. Resolving one would
need the real framework indexes, so the lock is written through envbuild's own lock model instead,
as `envbuild lock` writes it, and read back by the code under test. The base image is a one-layer
OCI image built here, byte for byte the same each time, which a test pushes over the registry API and
the benchmark serves itself.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envbuild import __version__
from envbuild._testing.condachannel import CondaChannel
from envbuild._testing.pyindex import PackageIndex
from envbuild.lockfile.model import (
    Lock,
    LockedCondaPackage,
    LockedPackage,
    LockedTarget,
    lock_path,
    write_lock,
)
from envbuild.matrix.load import load_matrix
from envbuild.spec.model import load_spec

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256_digest(body: bytes) -> str:
    """The content digest registries, OCI layouts and locks name a file by."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, kw_only=True)
class OciImage:
    """One image as a registry stores it: its config and layer blobs, and the manifest naming them."""

    config: bytes
    layer: bytes
    manifest: bytes

    @property
    def digest(self) -> str:
        """The manifest's digest: what a lock pins the base image by."""
        return sha256_digest(self.manifest)

    @property
    def blobs(self) -> dict[str, bytes]:
        """The blobs by digest, in the order a push uploads them (config, then layer)."""
        return {sha256_digest(self.config): self.config, sha256_digest(self.layer): self.layer}


def one_layer_image(path: str, payload: bytes, *, architecture: str = "amd64") -> OciImage:
    """A linux image whose one layer holds `payload` at `path`; gzip's mtime is fixed, so the same
    arguments give the same digests."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(path)
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    layer = gzip.compress(buffer.getvalue(), mtime=0)
    config = json.dumps(
        {
            "architecture": architecture,
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(buffer.getvalue())]},
            "config": {},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config), "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": sha256_digest(layer), "size": len(layer)}],
        }
    ).encode()
    return OciImage(config=config, layer=layer, manifest=manifest)


@dataclass(frozen=True, kw_only=True)
class CondaFile:
    """One package file on the loopback channel, as the lock pins it."""

    name: str
    version: str
    build: str
    subdir: str

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.tar.bz2"


def write_locked_project(
    directory: Path,
    *,
    index: PackageIndex,
    channel: CondaChannel,
    base_image: str,
    wheels: Sequence[str],
    conda: Sequence[CondaFile],
    targets: Sequence[str],
    installer: str | None = None,
) -> Path:
    """envbuild.toml (its [packages] index-url the loopback index) and its envbuild.lock; the spec's
    path. Every wheel is `<name>-1.0-py3-none-any.whl` on the index, pinned by its hash; conda's
    `python` goes in the framework layer and the rest in the user layer. Each named target is a
    linux/amd64 conda target with the same files and base, so a bundle must store them once."""
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "envbuild.toml"
    image = f'\n[image]\ninstaller = "{installer}"\n' if installer else ""
    spec_path.write_text(
        '[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = ["app"]\nindex-url = "{index.url}"\n{image}'
    )
    spec = load_spec(str(spec_path))
    packages = tuple(
        LockedPackage(
            name=name,
            version="1.0",
            layer="user",
            index=index.url,
            hashes=(sha256_digest((index.directory / f"{name}-1.0-py3-none-any.whl").read_bytes()),),
        )
        for name in wheels
    )
    locked_conda = tuple(
        LockedCondaPackage(
            name=file.name,
            version=file.version,
            build=file.build,
            layer="framework" if file.name == "python" else "user",
            channel=channel.url,
            subdir=file.subdir,
            url=f"{channel.url}/{file.subdir}/{file.filename}",
            sha256=channel.file_sha256(file.subdir, file.filename),
        )
        for file in conda
    )
    entries = tuple(
        LockedTarget(
            name=name,
            platform="linux/amd64",
            strategy="conda",
            python="3.11",
            base_image=base_image,
            requirements=("app",),
            stack=(("framework", "torch"),),
            packages=packages,
            conda=locked_conda,
        )
        for name in targets
    )
    lock = Lock(
        envbuild=__version__, spec_digest=spec.digest, matrix_digest=load_matrix().digest, targets=entries
    )
    write_lock(lock_path(str(spec_path)), lock)
    return spec_path
