"""Which GPU kernels a shared object carries: the SASS (`sm_XY`) and PTX (`compute_XY`) entries of its fatbin.

Read with NVIDIA's own `cuobjdump` (`--list-elf`, `--list-ptx`), from the 290 KB `nvidia-cuda-cuobjdump`
wheel, rather than by parsing `.nv_fatbin` ourselves. The fatbin container is not a documented format:
its entry flags (compression, the `a`/`f` architecture suffixes, new entry kinds) have changed between
CUDA releases, and a reader of our own would be right only until the next one. cuobjdump is what
NVIDIA ships to answer exactly this question, runs on a machine with no GPU, lists a file in
milliseconds (it reads the section table, not the code), and weighs less than one of our test wheels.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import subprocess

from envbuild._util.record import Record
from envbuild.audit.verdict import split_arch
from envbuild.errors import EnvbuildError, UsageError

# "ELF file    1: _linalg.1.sm_120.cubin", "PTX file    1: _linalg.1.sm_120.ptx"; names may carry a/f suffixes
_ENTRY_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(?P<name>.+?)\s*$")
_ARCH_RE = re.compile(r"\.(?P<arch>sm_\d{2,}[af]?)\.(cubin|ptx)$")
_NO_DEVICE_CODE = "does not contain device code"
LIST_TIMEOUT_S = 120  # listing reads the section table: milliseconds even for a 1 GB libtorch_cuda.so


class Kernels(Record):
    """The fatbin entries of one shared object. sass: "sm_90", "sm_90a", "sm_100f"...; ptx: "compute_120"...
    Both empty: the object has no device code (a CPU library, or a loader), which is not an error.

    unread: None when cuobjdump read the whole fatbin; else why it stopped, in its own words and with
    its version. cuobjdump 13 lists what it can and then gives up on entries it no longer reads (the
    sm_35 ones of cuBLAS 11, something in cuBLAS 12.4's fatbin): the entries listed before that are
    real and are kept, so the library is "partly read" (or "not read" when nothing was listed). What
    such a library decides is the audit's business (audit.tree), not a reason to stop reading.

    size: the bytes the file adds to the tree it was read in (audit.tree.read_tree sets it from the
    file's stat, which the walk has anyway): its size, or 0 for a further name of a file already
    counted (a hard link); None where it was not measured. The duplicate report (audit.duplicates)
    adds these up, so it needs no second pass over the gigabytes."""

    __slots__ = ("sass", "ptx", "unread", "size")
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    unread: str | None
    size: int | None

    def __init__(
        self,
        *,
        sass: tuple[str, ...],
        ptx: tuple[str, ...],
        unread: str | None = None,
        size: int | None = None,
    ) -> None:
        super().__init__(sass=sass, ptx=ptx, unread=unread, size=size)

    @property
    def has_device_code(self) -> bool:
        return bool(self.sass or self.ptx)

    @property
    def partly_read(self) -> bool:
        return self.unread is not None and self.has_device_code

    @property
    def not_read(self) -> bool:
        """cuobjdump could read nothing of it: whether it has device code is unknown."""
        return self.unread is not None and not self.has_device_code


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
                    try:
                        os.chmod(candidate, 0o755)
                    except OSError:
                        raise EnvbuildError(
                            f"{candidate} is not executable, and envbuild may not make it so",
                            fix=f"chmod +x {candidate} (or reinstall nvidia-cuda-cuobjdump)",
                        ) from None
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
        raise EnvbuildError(
            f"cuobjdump listed an entry envbuild cannot read: {name!r}",
            fix="report it with the cuobjdump version (envbuild expects NAME.N.sm_XY[a|f].cubin|ptx)",
        )
    arch = match.group("arch")
    return arch if kind == "ELF" else "compute_" + arch.removeprefix("sm_")


def check_elf(path: str) -> None:
    """Refuse a file that is not a whole ELF object. cuobjdump says "does not contain device code"
    for a truncated one (its section table is cut off), which would pass a broken library as a CPU
    one; the ELF header says where the section table ends, so a short file is caught here."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise UsageError(f"audit {path}: cannot read it ({exc.strerror})", fix="check the path") from None
    if header[:4] != b"\x7fELF" or len(header) < 52 or header[4] not in (1, 2) or header[5] not in (1, 2):
        raise UsageError(
            f"audit {path}: not an ELF shared object",
            fix="give a .so, a directory of them, a .whl, a local image or REPO@sha256:...",
        )
    needed = 64 if header[4] == 2 else 52  # the whole ELF header of its class
    if len(header) < needed:  # a 60-byte "ELF" was an internal error here (issue 33)
        raise UsageError(
            f"audit {path}: truncated ELF file ({size} bytes; its ELF header alone is {needed})",
            fix="copy or download it again",
        )
    order = "<" if header[5] == 1 else ">"
    if header[4] == 2:  # 64-bit: e_shoff at 40, e_shentsize/e_shnum at 58/60
        (shoff,) = struct.unpack_from(order + "Q", header, 40)
        shentsize, shnum = struct.unpack_from(order + "HH", header, 58)
    else:  # 32-bit: e_shoff at 32, e_shentsize/e_shnum at 46/48
        (shoff,) = struct.unpack_from(order + "I", header, 32)
        shentsize, shnum = struct.unpack_from(order + "HH", header, 46)
    if shoff + shentsize * shnum > size:
        raise UsageError(
            f"audit {path}: truncated ELF file ({size} bytes; its section table ends at byte "
            f"{shoff + shentsize * shnum})",
            fix="copy or download it again",
        )


@functools.lru_cache(maxsize=8)
def cuobjdump_version(binary: str) -> str:
    """ "cuobjdump 13.5 (V13.5.37)", as `cuobjdump --version` says it: what a reader of an error needs
    to tell one cuobjdump's limits from another's."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "cuobjdump (version unknown)"
    match = re.search(r"release (\d+\.\d+), (V[\w.]+)", done.stdout)
    return f"cuobjdump {match.group(1)} ({match.group(2)})" if match else "cuobjdump (version unknown)"


def _list(binary: str, path: str) -> tuple[list[str], str | None]:
    """(the entry lines, why cuobjdump stopped or None). One run lists both kinds (--list-elf
    --list-ptx): half the processes of two runs. A failing run keeps the entries it listed first."""
    try:
        done = subprocess.run(
            [binary, "--list-elf", "--list-ptx", path],
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            timeout=LIST_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise EnvbuildError(
            f"cuobjdump did not list {path} within {LIST_TIMEOUT_S} s",
            fix="listing takes milliseconds from a local disk: copy the file to one and audit it there",
        ) from None
    except OSError as exc:
        raise EnvbuildError(
            f"cannot run cuobjdump ({binary}): {exc.strerror}",
            fix="pip install --force-reinstall nvidia-cuda-cuobjdump",
        ) from None
    text = done.stdout + done.stderr
    if _NO_DEVICE_CODE in text:
        return [], None
    entries = [line for line in done.stdout.splitlines() if _ENTRY_RE.match(line.strip())]
    if done.returncode == 0:
        return entries, None
    # check_elf ruled out a truncated file: this is cuobjdump's limit, not the file's
    detail = (done.stderr.strip().splitlines() or ["no output"])[-1].strip()
    detail = detail.replace(path, os.path.basename(path))[:300]  # bounded; the path is said elsewhere
    listed = f"after listing {len(entries)} entries" if entries else "before listing any entry"
    return entries, f"{cuobjdump_version(binary)} stopped {listed} (exit {done.returncode}): {detail}"


def parse_listing(lines: list[str], unread: str | None = None) -> Kernels:
    """Kernels from cuobjdump --list-elf and --list-ptx lines (either, or both, mixed); `unread`: why
    the listing is not the whole fatbin, if it is not."""
    sass, ptx = set(), set()
    for line in lines:
        match = _ENTRY_RE.match(line.strip())
        if match is None:
            continue
        kind = match.group(1)
        (sass if kind == "ELF" else ptx).add(_arch(match.group("name"), kind))
    return Kernels(
        sass=tuple(sorted(sass, key=arch_key)), ptx=tuple(sorted(ptx, key=arch_key)), unread=unread
    )


def arch_key(arch: str) -> tuple[tuple[int, int], str]:
    """Sort by compute capability, then suffix: sm_90, sm_90a, sm_100, sm_100f, sm_120."""
    return split_arch(arch)


def read_kernels(path: str, binary: str | None = None) -> Kernels:
    """The SASS and PTX entries of the shared object at `path`; empty for one without device code;
    with `unread` set when cuobjdump stopped before the end of its fatbin."""
    check_elf(path)
    return parse_listing(*_list(binary or cuobjdump_binary(), path))
