"""Output locations a command cannot write to, for the `-o` tests of commands that write one file."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def unwritable_dir(tmp_path: Path) -> Path:
    """A directory no file can be created in, for whoever runs the tests.

    A mode 0555 directory stops an ordinary user but not root (CI containers run as root), so root
    gets /sys: sysfs refuses new files to root too, with EACCES, as a read-only mount does with EROFS.
    """
    if os.geteuid() == 0:
        return Path("/sys")
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return directory


# Each way an `-o FILE` can fail to be a file envbuild may write (issue 14, item 8).
BAD_OUTPUTS = ("directory", "directory-with-slash", "missing-directory", "under-a-file", "read-only", "fifo")


def bad_output(tmp_path: Path, kind: str) -> str:
    """An `-o` value of the given kind (one of BAD_OUTPUTS), made real under tmp_path."""
    if kind == "directory":
        return str(tmp_path)
    if kind == "directory-with-slash":
        return f"{tmp_path / 'not-yet'}/"
    if kind == "missing-directory":
        return str(tmp_path / "no" / "such" / "dir" / "out.file")
    if kind == "under-a-file":
        (tmp_path / "a-file").write_text("keep me\n")
        return str(tmp_path / "a-file" / "out.file")
    if kind == "read-only":
        return str(unwritable_dir(tmp_path) / "out.file")
    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")
        return str(tmp_path / "pipe")
    raise ValueError(kind)


def leftovers(output: str) -> list[Path]:
    """Temporary files a failed atomic write of `output` left next to it."""
    path = Path(output.rstrip("/"))
    return [p for p in path.parent.glob(f"{path.name}*.tmp") if p.is_file()] if path.parent.is_dir() else []


def assert_refused_output(code: int, out: str, err: str, output: str) -> None:
    """What every command says of an `-o` it cannot write: exit 2, the path, a fix, nothing left."""
    assert code == 2, err
    assert "internal error" not in err
    assert output in err
    assert "\n  fix: " in err
    assert not leftovers(output)
    assert not out
