"""Small wheels tagged for one CPU (cp311, manylinux_2_28 x86_64 or aarch64), so a lock test can
serve an index where the two platforms get different files, and so different hashes, without
downloading hundreds of megabytes of real framework wheels for each."""

from __future__ import annotations

import base64
import hashlib
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from envbuild._testing.pyindex import build_wheel


def build_platform_wheel(
    directory: Path,
    name: str,
    version: str,
    machine: str,
    requires: Sequence[str] = (),
    extras: dict[str, list[str]] | None = None,
) -> Path:
    """build_wheel's wheel, retagged `cp311-cp311-manylinux_2_28_<machine>` (its WHEEL file and
    RECORD rewritten to match, its module saying which machine it is for, so the bytes differ)."""
    tag = f"cp311-cp311-manylinux_2_28_{machine}"
    with tempfile.TemporaryDirectory() as scratch:
        plain = build_wheel(Path(scratch), name, version, requires, extras)
        with zipfile.ZipFile(plain) as archive:
            contents = {n: archive.read(n) for n in archive.namelist() if not n.endswith("/RECORD")}
    dist_info = next(n.split("/")[0] for n in contents if n.endswith(".dist-info/WHEEL"))
    module = dist_info.rsplit("-", 2)[0]  # name-version.dist-info
    contents[f"{dist_info}/WHEEL"] = (
        contents[f"{dist_info}/WHEEL"].replace(b"Tag: py3-none-any", f"Tag: {tag}".encode())
    ).replace(b"Root-Is-Purelib: true", b"Root-Is-Purelib: false")
    contents[f"{module}/__init__.py"] += f'MACHINE = "{machine}"\n'.encode()
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    target = Path(directory) / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return target


def sha256_of(path: Path) -> str:
    """`sha256:<hex>` of a file, as a lock records a wheel."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
