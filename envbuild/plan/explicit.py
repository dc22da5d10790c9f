"""The locked conda layer as micromamba explicit files: `@EXPLICIT`, then one `URL#sha256:<hex>` line
per package, which micromamba installs as they are, with no solve.

libmamba (mamba >= 2.1.0, mamba-org/mamba PR #3866) reads the `#sha256:` suffix of an explicit line
(libmamba/src/specs/package_info.cpp, PackageInfo::from_url) and checks each downloaded file against
it (libmamba/src/core/package_fetcher.cpp, PackageFetcher::validate). A suffix that is not 64 hex
digits is dropped there without a word, so every line is checked here, whatever built the lock.

Order: an explicit install links the packages in the file's order; libmamba does not sort them
(libmamba/src/core/transaction.cpp, create_explicit_transaction_from_urls and the MTransaction it
builds). The order matters where linking one package runs another's code: a noarch: python package
is byte-compiled with the prefix's python as soon as it is linked. The lock records no dependencies,
so the lines put every platform package (python and the native libraries it loads are all
linux-64 / linux-aarch64) before the noarch ones, each group by name: python is in place before
anything is compiled with it.
"""

from __future__ import annotations

import re

from envbuild.errors import LockError
from envbuild.lockfile.model import LockedCondaPackage
from envbuild.spec import validate

FILES = {"framework": "conda-framework.txt", "user": "conda-user.txt"}
_SHA256_RE = re.compile(r"sha256:[0-9a-f]{64}")


def explicit_file(packages: tuple[LockedCondaPackage, ...], layer: str, *, target: str, subdir: str) -> str:
    """The explicit file of `layer`'s packages ("" when the layer has none)."""
    chosen = sorted((p for p in packages if p.layer == layer), key=lambda p: (p.subdir == "noarch", p.name))
    if not chosen:
        return ""
    lines = [
        f"# envbuild.lock, target {target}: the {layer} conda layer. micromamba installs exactly these",
        "# files, checking each one's sha256, with no solve. Change envbuild.toml, run `envbuild lock`.",
        f"# platform: {subdir}",
        "@EXPLICIT",
    ]
    lines += [explicit_line(p, target) for p in chosen]
    return "\n".join(lines) + "\n"


def explicit_line(package: LockedCondaPackage, target: str) -> str:
    """`URL#sha256:<hex>`, from fields checked again here: a lock built in-process skips the reader."""
    where = f"envbuild.lock target {target!r} conda package {package.name!r}"
    try:
        validate.url(package.url)
    except ValueError as exc:
        raise LockError(
            f"{where}: url {exc}", fix="run `envbuild lock` and commit envbuild.lock; do not edit it"
        ) from None
    if not _SHA256_RE.fullmatch(package.sha256):
        raise LockError(
            f"{where}: sha256 {package.sha256!r} is not sha256:<64 lowercase hex>",
            fix="run `envbuild lock` and commit envbuild.lock; do not edit it",
        )
    return f"{package.url}#{package.sha256}"
