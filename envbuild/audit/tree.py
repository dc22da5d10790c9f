"""Audit a directory tree (an unpacked wheel, an image's filesystem): every shared object's kernels,
and a verdict per GPU for the libraries that count."""

from __future__ import annotations

import os

from envbuild._util.record import Record
from envbuild.audit.kernels import Kernels, cuobjdump_binary, read_kernels
from envbuild.audit.libraries import counts_for, framework_of
from envbuild.audit.verdict import RUNS, judge
from envbuild.matrix.model import Gpu


class LibraryAudit(Record):
    __slots__ = ("path", "kernels", "counts", "verdicts")
    path: str  # inside the artifact, "/"-separated
    kernels: Kernels
    counts: bool  # a library the framework loads its kernels from
    verdicts: tuple[tuple[str, str], ...]  # (GPU name, verdict), in the order the GPUs were given


class Audit(Record):
    __slots__ = ("target", "framework", "gpus", "libraries", "without_device_code")
    target: str
    framework: str | None
    gpus: tuple[Gpu, ...]
    libraries: tuple[LibraryAudit, ...]  # those with device code
    without_device_code: tuple[str, ...]

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(GPU name, library) for every counted library that has no kernel image for a GPU."""
        return [
            (gpu, library.path)
            for library in self.libraries
            if library.counts
            for gpu, verdict in library.verdicts
            if verdict not in RUNS
        ]

    @property
    def ok(self) -> bool:
        return not self.failures


def shared_objects(root: str) -> list[str]:
    """Paths (relative to root, "/"-separated) of the ELF shared objects under root, sorted."""
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            if ".so" not in name or name.endswith((".py", ".pyi", ".txt")):
                continue
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                if handle.read(4) != b"\x7fELF":
                    continue
            found.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return sorted(found)


def audit_tree(
    root: str,
    gpus: tuple[Gpu, ...],
    *,
    target: str,
    framework: str | None = None,
    only: tuple[str, ...] | None = None,
) -> Audit:
    """Audit every shared object under `root` (or just the `only` paths, relative to it)."""
    binary = cuobjdump_binary()
    paths = list(only) if only is not None else shared_objects(root)
    framework = framework or framework_of(paths)
    libraries, plain = [], []
    for path in paths:
        kernels = read_kernels(os.path.join(root, path), binary)
        if not kernels.has_device_code:
            plain.append(path)
            continue
        verdicts = tuple((gpu.name, judge(kernels.sass, kernels.ptx, gpu.cc)) for gpu in gpus)
        libraries.append(
            LibraryAudit(path=path, kernels=kernels, counts=counts_for(path, framework), verdicts=verdicts)
        )
    return Audit(
        target=target,
        framework=framework,
        gpus=gpus,
        libraries=tuple(libraries),
        without_device_code=tuple(plain),
    )
