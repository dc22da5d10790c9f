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
