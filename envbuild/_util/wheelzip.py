"""A wheel's zip archive, checked against the unpack bounds before any member is read.

A 4 MiB wheel declared members that unpack to 4 GiB, and zip entries whose compressed data overlap
(every entry pointing into the same few kilobytes) reach a 47,000:1 ratio (issue 33). The central
directory declares every member's size, and zipfile never inflates a member past it (a member that
would is a CRC error), so the bounds are judged from the directory alone, before a byte is unpacked:
the member count, each path, the declared total and its ratio to the wheel's own size, and that no
two members' data overlap, which no zip writer produces.
"""

from __future__ import annotations

import itertools
import zipfile

from envbuild._util import limits
from envbuild.errors import UsageError

LOCAL_HEADER = 30  # a zip local file header's fixed part, before its name and extra field
NAME_BYTES = limits.NAME_BYTES.default  # one path component at most (Linux's NAME_MAX)


def checked_members(archive: zipfile.ZipFile, where: str, packed: int) -> list[zipfile.ZipInfo]:
    """The archive's members, after the bounds (UsageError naming `where` and the member): `packed`
    is the archive's size in bytes, the denominator of the ratio."""
    members = archive.infolist()
    most = limits.ARCHIVE_ENTRIES.get()
    if len(members) > most:
        raise UsageError(
            f"{where} has {len(members):,} members (the entries limit is {most:,})",
            fix="download it again; no genuine wheel holds that many files",
        )
    longest = limits.PATH_CHARACTERS.get()
    for member in members:
        if len(member.filename) > longest or any(
            len(part.encode("utf-8", "surrogateescape")) > NAME_BYTES for part in member.filename.split("/")
        ):
            raise UsageError(
                f"{where}: member {member.filename[:120]!r}... has a path of {len(member.filename):,} "
                f"characters or a file name over {NAME_BYTES} bytes (at most {longest:,} and "
                f"{NAME_BYTES}, Linux's PATH_MAX and NAME_MAX)",
                fix="download it again; no installer can unpack that member",
            )
    _no_overlap(members, where)
    _no_file_as_directory(members, where)
    total = sum(member.file_size for member in members)
    bound = limits.UNPACK_BYTES.get()
    if total > bound:
        raise UsageError(
            f"{where} unpacks to {limits.size(total)}, more than the unpack limit of {limits.size(bound)}",
            fix=f"if the wheel is genuine, raise {limits.UNPACK_BYTES.env} (bytes; now {bound})",
        )
    ratio = limits.UNPACK_RATIO.get()
    if total > limits.UNPACK_RATIO_FLOOR and total > ratio * max(packed, 1):
        largest = max(members, key=lambda member: member.file_size)
        raise UsageError(
            f"{where} unpacks to {limits.size(total)} from {limits.size(packed)} "
            f"({total // max(packed, 1)}:1; the limit is {ratio}:1 past the first "
            f"{limits.size(limits.UNPACK_RATIO_FLOOR)}; largest member {largest.filename!r}): a zip bomb",
            fix=f"if the wheel is genuine, raise {limits.UNPACK_RATIO.env} (now {ratio})",
        )
    return members


def member_bound(member: zipfile.ZipInfo, where: str) -> None:
    """Refuse a member declared larger than one file may be to be read (limits.MEMBER_BYTES)."""
    over = limits.member_over(where, member.filename, member.file_size, "wheel")
    if over is not None:
        raise UsageError(over[0], fix=over[1])


def _no_overlap(members: list[zipfile.ZipInfo], where: str) -> None:
    """Refuse members whose data ranges overlap (the overlapping-entries zip bomb). The end used is
    the least a member can take (its local header without the extra field, its name, its compressed
    data), so a genuine archive never fails it."""
    ordered = sorted(members, key=lambda member: member.header_offset)
    for before, after in itertools.pairwise(ordered):
        name = before.orig_filename.encode("utf-8" if before.flag_bits & 0x800 else "cp437", "replace")
        end = before.header_offset + LOCAL_HEADER + len(name) + before.compress_size
        if after.header_offset < end:
            raise UsageError(
                f"{where}: members {before.filename!r} and {after.filename!r} overlap (the data of one "
                f"ends at byte {end:,}, the other starts at {after.header_offset:,}): a zip bomb, "
                "which no zip writer makes",
                fix="download the wheel again from its index; do not install this one",
            )


def _no_file_as_directory(members: list[zipfile.ZipInfo], where: str) -> None:
    """Refuse a member under another member that is a file (`x.so` and `x.so/y.so`): no installer
    can unpack both, and an audit that tried crashed (issue 33)."""
    files = {member.filename.rstrip("/") for member in members if not member.is_dir()}
    for member in members:
        parts = member.filename.rstrip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in files:
                raise UsageError(
                    f"{where}: member {member.filename!r} is under {parent!r}, which is a file of the "
                    "same wheel: no installer can unpack both",
                    fix="download the wheel again from its index; do not install this one",
                )
