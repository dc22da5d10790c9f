"""Audit what is on disk: a shared object, a directory, or a wheel (its shared objects unpacked to a
temporary directory; nothing is installed). Images are read by envbuild.image.filesystem."""

from __future__ import annotations

import os
import tempfile
import zipfile

from envbuild.audit.tree import Audit, audit_tree
from envbuild.errors import UsageError
from envbuild.matrix.model import Gpu


def is_local(target: str) -> bool:
    return os.path.exists(target)


def audit_path(target: str, gpus: tuple[Gpu, ...], framework: str | None = None) -> Audit:
    if os.path.isdir(target):
        return audit_tree(target, gpus, target=target, framework=framework)
    if target.endswith(".whl"):
        return _audit_wheel(target, gpus, framework)
    with open(target, "rb") as handle:
        if handle.read(4) != b"\x7fELF":
            raise UsageError(
                f"audit {target}: not an ELF shared object, a wheel or a directory",
                fix="give a .so, a directory of them, a .whl, a local image or REPO@sha256:...",
            )
    root, name = os.path.split(os.path.abspath(target))
    return audit_tree(root, gpus, target=target, framework=framework, only=(name,))


def _audit_wheel(target: str, gpus: tuple[Gpu, ...], framework: str | None) -> Audit:
    try:
        archive = zipfile.ZipFile(target)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError(f"audit {target}: not a readable wheel ({exc})", fix="download it again") from None
    with archive, tempfile.TemporaryDirectory(prefix="envbuild-audit-") as root:
        members = [m for m in archive.infolist() if ".so" in os.path.basename(m.filename) and not m.is_dir()]
        for member in members:
            archive.extract(member, root)
        return audit_tree(root, gpus, target=target, framework=framework)
