"""Audit what is on disk: a shared object, a directory, or a wheel (its shared objects unpacked to a
temporary directory; nothing is installed). Images are read by envbuild.image.filesystem."""

from __future__ import annotations

import os
import tempfile
import zipfile
import zlib

from envbuild._util.wheelzip import checked_members, member_bound
from envbuild.audit.skip import AuditSkip
from envbuild.audit.tree import Audit, audit_tree, is_shared_object_name
from envbuild.errors import UsageError
from envbuild.matrix.model import Gpu


def is_local(target: str) -> bool:
    """A file or directory, or a name only a path can have (/..., ./..., ~/..., *.so, *.whl): a
    missing one is then a UsageError naming it, not a lookup for an image of that name."""
    if os.path.exists(target):
        return True
    name = os.path.basename(target)
    return target.startswith(("/", ".", "~")) or target.endswith(".whl") or is_shared_object_name(name)


def audit_path(
    target: str, gpus: tuple[Gpu, ...], framework: str | None = None, skip: tuple[AuditSkip, ...] = ()
) -> Audit:
    """Audit a local .so, directory or wheel; UsageError (exit 2) naming `target` for anything else.
    The libraries `skip` names are listed, not judged (audit.skip)."""
    if not os.path.exists(target):
        raise UsageError(
            f"audit {target}: no such file or directory",
            fix="give a .so, a directory of them, a .whl, a local image or REPO@sha256:...",
        )
    if os.path.isdir(target):
        return audit_tree(target, gpus, target=target, framework=framework, skip=skip)
    if target.endswith(".whl"):
        return _audit_wheel(target, gpus, framework, skip)
    try:
        with open(target, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise UsageError(
            f"audit {target}: cannot read it ({exc.strerror})", fix="check its permissions"
        ) from None
    if magic != b"\x7fELF":
        raise UsageError(
            f"audit {target}: not an ELF shared object, a wheel or a directory",
            fix="give a .so, a directory of them, a .whl, a local image or REPO@sha256:...",
        )
    root, name = os.path.split(os.path.abspath(target))
    return audit_tree(root, gpus, target=target, framework=framework, only=(name,), skip=skip)


def _audit_wheel(
    target: str, gpus: tuple[Gpu, ...], framework: str | None, skip: tuple[AuditSkip, ...]
) -> Audit:
    """Unpack the wheel's shared objects to a temporary directory and audit them, after the unpack
    bounds (envbuild._util.wheelzip): a zip bomb or overlapping entries are exit 2, naming the wheel
    and the member, before a byte is unpacked."""
    try:
        archive = zipfile.ZipFile(target)
        packed = os.path.getsize(target)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UsageError(f"audit {target}: not a readable wheel ({exc})", fix="download it again") from None
    with archive, tempfile.TemporaryDirectory(prefix="envbuild-audit-") as root:
        where = f"audit {target}"
        members = [
            m
            for m in checked_members(archive, where, packed)
            if is_shared_object_name(m.filename) and not m.is_dir()
        ]
        for member in members:
            member_bound(member, where)
        try:
            for member in members:
                archive.extract(member, root)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise UsageError(  # a member cut off or corrupt, or compressed in a way zipfile lacks
                f"audit {target}: not a readable wheel ({exc})", fix="download it again"
            ) from None
        return audit_tree(root, gpus, target=target, framework=framework, skip=skip)
