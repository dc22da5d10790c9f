"""Files for audit tests that need no download: real ELF objects without device code, and broken ones."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def plain_elf(path: Path) -> Path:
    """A real ELF object with no fatbin (this Python's own binary), copied to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(os.path.realpath(sys.executable), path)
    return path


def truncated(source: Path, path: Path, size: int) -> Path:
    """The first `size` bytes of `source`: an ELF or zip cut off as an interrupted copy leaves it."""
    path.write_bytes(source.read_bytes()[:size])
    return path


def replaying_cuobjdump(directory: Path, capture: Path, stdout: Path | None = None) -> str:
    """A cuobjdump that replays a captured run of NVIDIA's (tests/fixtures/audit/*.run.json: its exit
    code, stderr and `--version` text; `stdout`, the listing it printed): what cuobjdump 13 does on a
    library it cannot read to the end, without the 363 MB wheel. The path given replaces `{path}`."""
    script = directory / "cuobjdump"
    listing = str(stdout) if stdout else ""
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"run = json.load(open({str(capture)!r}))\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    sys.stdout.write(run['version'])\n"
        "    sys.exit(0)\n"
        f"if {listing!r}:\n"
        f"    sys.stdout.write(open({listing!r}).read())\n"
        "sys.stderr.write(run['stderr'].replace('{path}', sys.argv[-1]))\n"
        "sys.exit(run['returncode'])\n"
    )
    script.chmod(0o755)
    return str(script)


def with_fatbin(source: Path, path: Path, payload: bytes) -> Path:
    """`source` (a 64-bit little-endian ELF) with a `.nv_fatbin` section holding `payload`, at `path`:
    what NVIDIA's cuobjdump looks for. A payload that is no fatbin makes it stop before listing any
    entry ("Invalid fatbin header"), a library it cannot read at all, with no NVIDIA download. Done
    as `objcopy --add-section` would: the payload, a longer section-name table and a new section
    header table go after the file's end, and the ELF header points at them."""
    import struct

    data = bytearray(source.read_bytes())
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "a 64-bit little-endian ELF"
    (shoff,) = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    headers = [bytearray(data[shoff + i * shentsize : shoff + (i + 1) * shentsize]) for i in range(shnum)]
    names_offset, names_size = struct.unpack_from("<QQ", headers[shstrndx], 24)
    names = bytes(data[names_offset : names_offset + names_size])

    def pad(align: int) -> None:
        data.extend(b"\0" * (-len(data) % align))

    pad(16)
    payload_offset = len(data)
    data.extend(payload)
    new_names_offset = len(data)
    data.extend(names + b".nv_fatbin\0")
    struct.pack_into("<QQ", headers[shstrndx], 24, new_names_offset, len(names) + len(b".nv_fatbin\0"))
    # Elf64_Shdr: name, type (PROGBITS), flags, addr, offset, size, link, info, addralign, entsize
    fatbin = struct.pack("<IIQQQQIIQQ", len(names), 1, 0, 0, payload_offset, len(payload), 0, 0, 8, 0)
    pad(8)
    table = len(data)
    for header in headers:
        data.extend(header)
    data.extend(fatbin)
    struct.pack_into("<Q", data, 40, table)
    struct.pack_into("<H", data, 60, shnum + 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))
    return path
