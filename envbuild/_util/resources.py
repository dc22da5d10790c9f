"""Where the data that ships beside the code lives: matrix/ and templates/.

In a checkout they sit at the top of the repository (the product layout); in an installed wheel they
are copied into envbuild/_data/ (pyproject's force-include). Every reader asks here, so the two
layouts are told apart in one place.
"""

from __future__ import annotations

import os

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_PACKAGED = os.path.join(_PACKAGE, "_data")


def data_dir(name: str) -> str:
    """envbuild/_data/<name> in an installed wheel, else the checkout's top-level <name>/."""
    packaged = os.path.join(_PACKAGED, name)
    return packaged if os.path.isdir(packaged) else os.path.join(os.path.dirname(_PACKAGE), name)


def inside_installed_package(path: str) -> bool:
    """Whether `path` is data inside the installed package (edits there vanish on upgrade)."""
    return (os.path.abspath(path) + os.sep).startswith(_PACKAGED + os.sep)
