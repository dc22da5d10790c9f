"""Every bound envbuild puts on what it reads, in one place: docs/concepts/trust-model.md lists them.

Registries, channels, indexes, wheels, image layers, credential helpers and files named on the
command line are input envbuild did not write. Without a bound, a 1.5 GiB manifest exhausted memory,
a registry sending one byte every 20 s hung `audit` for ever (requests' timeout is per read), a 208-byte
sparse layer unpacked to 4 GiB and `/dev/zero` given as a log was read until memory ran out (issue 33).
Each bound here is a named Limit with what it defends; the few a real user could outgrow (a very large
image, a slow mirror) take an environment override, read when the bound is asked for, so a test or a
user can change it without a new release. Every bound is far above what a genuine input needs: the
largest file in torch 2.6.0+cu124's wheels (libtorch_cuda.so) is 860 MiB, its wheels pack 1.4 to 2.8
to 1 and the largest holds 11,402 files, and the registry spec's own manifest limit is 4 MiB.
"""

from __future__ import annotations

import os

from envbuild._util.record import Record
from envbuild.errors import UsageError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


class Limit(Record):
    """One bound: its default, the variable that overrides it (None: fixed), and what it defends."""

    __slots__ = ("name", "default", "unit", "env", "defends")
    name: str
    default: int
    unit: str  # "bytes", "seconds", "levels", "characters", "ratio", "entries", "links", "bytes per second"
    env: str | None
    defends: str

    def get(self) -> int:
        """The bound in force: the override when its variable is set to a positive whole number."""
        if self.env is None:
            return self.default
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        if not raw.isdigit() or int(raw) <= 0:
            raise UsageError(
                f"{self.env}={raw!r} is not a positive whole number of {self.unit}",
                fix=f"set {self.env} to a number such as {self.default} (the default), or unset it",
            )
        return int(raw)

    def shown(self) -> str:
        """The default as the docs' table and the errors write it: 4 MiB, 600 s, 200:1."""
        if self.unit == "bytes":
            return size(self.default)
        if self.unit == "bytes per second":
            return f"{size(self.default)}/s"
        if self.unit == "seconds":
            return f"{self.default} s"
        if self.unit == "ratio":
            return f"{self.default}:1"
        return f"{self.default:,} {self.unit}"


MANIFEST_BYTES = Limit(
    name="manifest",
    default=4 * MIB,
    unit="bytes",
    env=None,
    defends="a registry manifest, index or referrers list (distribution's own limit is 4 MiB)",
)
DOCUMENT_BYTES = Limit(
    name="document",
    default=64 * MIB,
    unit="bytes",
    env=None,
    defends="an image config, an attestation, an SBOM or an index page read into memory",
)
DOWNLOAD_BYTES = Limit(
    name="download",
    default=2 * GIB,
    unit="bytes",
    env="ENVBUILD_MAX_DOWNLOAD_BYTES",
    defends="one download written to disk or held whole: a conda repodata.json, a wheel",
)
HTTP_DEADLINE_S = Limit(
    name="http-deadline",
    default=600,
    unit="seconds",
    env="ENVBUILD_HTTP_DEADLINE_S",
    defends="one HTTP request from its start to its last byte (a per-read timeout lets a server that "
    "sends one byte every 20 s hold a command for ever)",
)
LAYER_BYTES = Limit(
    name="layer",
    default=64 * GIB,
    unit="bytes",
    env="ENVBUILD_MAX_LAYER_BYTES",
    defends="one image layer streamed from a registry (read no further than the size its manifest "
    "declares, which may not exceed this)",
)
LAYER_RATE = Limit(
    name="layer-rate",
    default=1 * MIB,
    unit="bytes per second",
    env=None,
    defends="the slowest a layer may stream: its deadline is the HTTP deadline plus one second per "
    "this many bytes it declares, so a 4 GiB layer on a slow link is not cut off",
)
UNPACK_BYTES = Limit(
    name="unpack",
    default=64 * GIB,
    unit="bytes",
    env="ENVBUILD_MAX_UNPACK_BYTES",
    defends="the bytes one image layer or wheel may unpack to",
)
UNPACK_RATIO = Limit(
    name="unpack-ratio",
    default=200,
    unit="ratio",
    env="ENVBUILD_MAX_UNPACK_RATIO",
    defends="unpacked bytes per packed byte, past the first 64 MiB unpacked: a zip or gzip "
    "bomb, overlapping zip entries, sparse tar members (torch 2.6.0+cu124's wheels pack 1.4 to 2.8 to 1)",
)
UNPACK_RATIO_FLOOR = 64 * MIB  # the ratio is judged only past this many unpacked bytes
MEMBER_BYTES = Limit(
    name="member",
    default=8 * GIB,
    unit="bytes",
    env="ENVBUILD_MAX_MEMBER_BYTES",
    defends="one file of a layer or wheel handed to cuobjdump or read into memory (the largest in "
    "torch 2.6.0+cu124, libtorch_cuda.so, is 860 MiB)",
)
ARCHIVE_ENTRIES = Limit(
    name="entries",
    default=1_000_000,
    unit="entries",
    env=None,
    defends="the members of one layer or wheel (a CUDA torch image has about 60,000 files)",
)
PATH_CHARACTERS = Limit(
    name="path",
    default=4096,
    unit="characters",
    env=None,
    defends="one member's path inside a layer or wheel (Linux's PATH_MAX)",
)
NAME_BYTES = Limit(
    name="name",
    default=255,
    unit="bytes",
    env=None,
    defends="one file name (a path component) inside a layer or wheel (Linux's NAME_MAX; a longer one "
    "crashed the audit)",
)
LINK_HOPS = Limit(
    name="link-hops",
    default=40,
    unit="links",
    env=None,
    defends="the symbolic links the audit follows to judge a library by its target (Linux's own ELOOP "
    "bound: a loop ends there)",
)
FILE_BYTES = Limit(
    name="file",
    default=64 * MIB,
    unit="bytes",
    env=None,
    defends="a matrix file, spec, lock, report or log named on the command line (only regular files "
    "are read)",
)
HELPER_OUTPUT_BYTES = Limit(
    name="helper-output",
    default=1 * MIB,
    unit="bytes",
    env=None,
    defends="what a docker credential helper prints (a real answer is under 8 KiB)",
)
FIELD_CHARACTERS = Limit(
    name="field",
    default=8192,
    unit="characters",
    env=None,
    defends="one text field of a spec, lock or matrix row, so validation stays linear and bounded",
)
PARSE_DEPTH = Limit(
    name="depth",
    default=1000,
    unit="levels",
    env=None,
    defends="the nesting of any JSON or TOML document (Python's recursion limit; envbuild's own nest "
    "under 20)",
)

ALL = (
    MANIFEST_BYTES,
    DOCUMENT_BYTES,
    DOWNLOAD_BYTES,
    HTTP_DEADLINE_S,
    LAYER_BYTES,
    LAYER_RATE,
    UNPACK_BYTES,
    UNPACK_RATIO,
    MEMBER_BYTES,
    ARCHIVE_ENTRIES,
    PATH_CHARACTERS,
    NAME_BYTES,
    LINK_HOPS,
    FILE_BYTES,
    HELPER_OUTPUT_BYTES,
    FIELD_CHARACTERS,
    PARSE_DEPTH,
)


def size(count: int) -> str:
    """1.5 GiB, 4 MiB, 208 B: a byte count as the error messages show it."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def member_over(where: str, member: str, count: int, genuine: str) -> tuple[str, str] | None:
    """(message, fix) when one member of `count` bytes is more than MEMBER_BYTES, else None: the one
    wording for a layer's member and a wheel's, each raised as its own error type (exit 1 and 2)."""
    most = MEMBER_BYTES.get()
    if count <= most:
        return None
    return (
        f"{where}: member {member!r} is {size(count)}, more than the {size(most)} one file may be to be read",
        f"if the {genuine} is genuine, raise {MEMBER_BYTES.env} (bytes; now {most})",
    )
