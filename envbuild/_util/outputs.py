"""The one file a command writes where its `-o FILE` says: every way that place can be unusable is a
UsageError (exit 2) that names the path and the fix, not an OSError from deep inside a write.

A command that writes one generated file (`ci github`, `bake`) checks the place before it writes:
a directory given where a file is expected, a parent that is missing or is a file, something that is
not a regular file (replacing /dev/null or a FIFO with a regular file would break whatever uses it),
then writes atomically and turns what the filesystem still refuses (read-only, full) into the same
kind of message. Missing directories are not made up silently: a typo in `-o` would scatter files.
"""

from __future__ import annotations

import os
import shlex

from envbuild._util.files import write_atomic
from envbuild.errors import UsageError


def write_output(
    path: str,
    data: str | bytes,
    *,
    default_name: str,
    flag: str = "-o",
    creatable: tuple[str, ...] = (),
) -> None:
    """Write `data` to the file `path` names, atomically.

    default_name: the file name the fix suggests when `path` is a directory. creatable: the trailing
    directory names that may be created when missing, because the file is only read from there
    (`.github`, `workflows` for a workflow); any other missing directory is an error.
    """
    check_output(path, default_name=default_name, flag=flag, creatable=creatable)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_atomic(path, data)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write it ({exc.strerror or exc})",
            fix=f"give {flag} a file in a directory you can write to, on a filesystem with free space",
        ) from None


def check_output(path: str, *, default_name: str, flag: str = "-o", creatable: tuple[str, ...] = ()) -> None:
    """Raise UsageError unless `path` can become a regular file (see write_output)."""
    if path.endswith(os.sep) or os.path.isdir(path):
        what = "is a directory" if os.path.isdir(path) else f"ends in {os.sep}, so it names a directory"
        raise UsageError(
            f"{flag} {path}: {what}; {flag} names the file to write",
            fix=f"name a file, e.g. {flag} {shlex.quote(os.path.join(path, default_name))}",
        )
    if os.path.exists(path) and not os.path.isfile(path):
        raise UsageError(
            f"{flag} {path}: exists and is not a regular file; writing would replace it",
            fix=f"give {flag} the path of a new or regular file",
        )
    shown = os.path.dirname(path) or "."
    missing: list[str] = []  # the directories between the nearest existing one and the file
    probe = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(probe):
        missing.insert(0, os.path.basename(probe))
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(
            f"{flag} {path}: {probe} is not a directory",
            fix=f"give {flag} a file in an existing directory",
        )
    if missing and tuple(missing) != creatable[-len(missing) :]:
        raise UsageError(
            f"{flag} {path}: the directory {shown} does not exist",
            fix=f"create it (mkdir -p {shlex.quote(shown)}) or give {flag} a file in an existing directory",
        )
