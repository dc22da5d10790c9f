"""Which GPU kernels a shared object carries: the SASS (`sm_XY`) and PTX (`compute_XY`) entries of its fatbin.

Read with NVIDIA's own `cuobjdump` (`--list-elf`, `--list-ptx`), from the 290 KB `nvidia-cuda-cuobjdump`
wheel, rather than by parsing `.nv_fatbin` ourselves. The fatbin container is not a documented format:
its entry flags (compression, the `a`/`f` architecture suffixes, new entry kinds) have changed between
CUDA releases, and a reader of our own would be right only until the next one. cuobjdump is what
NVIDIA ships to answer exactly this question, runs on a machine with no GPU, lists a file in
milliseconds (it reads the section table, not the code), and weighs less than one of our test wheels.
"""

from __future__ import annotations

import os
import re
import subprocess

from envbuild._util.record import Record
from envbuild.errors import EnvbuildError

# "ELF file    1: _linalg.1.sm_120.cubin", "PTX file    1: _linalg.1.sm_120.ptx"; names may carry a/f suffixes
_ENTRY_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(?P<name>.+?)\s*$")
_ARCH_RE = re.compile(r"\.(?P<arch>sm_\d+[af]?)\.(cubin|ptx)$")
_NO_DEVICE_CODE = "does not contain device code"


class Kernels(Record):
    """The fatbin entries of one shared object. sass: "sm_90", "sm_90a", "sm_100f"...; ptx: "compute_120"...
    Both empty: the object has no device code (a CPU library, or a loader), which is not an error."""

    __slots__ = ("sass", "ptx")
    sass: tuple[str, ...]
    ptx: tuple[str, ...]

    @property
    def has_device_code(self) -> bool:
        return bool(self.sass or self.ptx)


def cuobjdump_binary() -> str:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel (nvidia/cu13/bin, or cuda_cuobjdump/bin in older
    wheels), else one on PATH."""
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for relative in ("cu13/bin/cuobjdump", "cuda_cuobjdump/bin/cuobjdump", "cu12/bin/cuobjdump"):
            candidate = os.path.join(root, relative)
            if os.path.isfile(candidate):
                if not os.access(candidate, os.X_OK):  # wheels do not always keep the mode bit
                    os.chmod(candidate, 0o755)
                return candidate
    found = shutil.which("cuobjdump")
    if found:
        return found
    raise EnvbuildError(
        "cuobjdump is not installed",
        fix="pip install nvidia-cuda-cuobjdump (envbuild depends on it for audits)",
    )


def _arch(name: str, kind: str) -> str:
    match = _ARCH_RE.search(name)
    if match is None:
        raise EnvbuildError(f"cuobjdump listed an entry envbuild cannot read: {name!r}")
    arch = match.group("arch")
    return arch if kind == "ELF" else "compute_" + arch.removeprefix("sm_")


def _list(binary: str, flag: str, path: str) -> list[str]:
    done = subprocess.run([binary, flag, path], capture_output=True, text=True, errors="replace", check=False)
    text = done.stdout + done.stderr
    if _NO_DEVICE_CODE in text:
        return []
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvbuildError(
            f"cuobjdump {flag} {path} failed: {detail}", fix="check the file is an ELF shared object"
        )
    return [line for line in done.stdout.splitlines() if _ENTRY_RE.match(line.strip())]


def parse_listing(lines: list[str]) -> Kernels:
    """Kernels from cuobjdump --list-elf and --list-ptx lines (either, or both, mixed)."""
    sass, ptx = set(), set()
    for line in lines:
        match = _ENTRY_RE.match(line.strip())
        if match is None:
            continue
        kind = match.group(1)
        (sass if kind == "ELF" else ptx).add(_arch(match.group("name"), kind))
    return Kernels(sass=tuple(sorted(sass, key=arch_key)), ptx=tuple(sorted(ptx, key=arch_key)))


def arch_key(arch: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", arch)
    return (int(digits or 0), arch)


def read_kernels(path: str, binary: str | None = None) -> Kernels:
    """The SASS and PTX entries of the shared object at `path`; empty for one without device code."""
    binary = binary or cuobjdump_binary()
    return parse_listing(_list(binary, "--list-elf", path) + _list(binary, "--list-ptx", path))
