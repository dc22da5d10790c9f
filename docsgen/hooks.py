"""MkDocs hook (mkdocs.yml `hooks:`): add the generated pages (docsgen/pages.py) to the site.

MkDocs loads this file by its path, not as a module of a package, so the repository root is put on
sys.path first: the generators import envbuild (the checkout's) and docsgen.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from docsgen.pages import GENERATED  # noqa: E402


def on_files(files, config):  # type: ignore[no-untyped-def]  # MkDocs' hook signature
    """Each generated page as a file of the site, made now (MkDocs >= 1.6: File.generated)."""
    from mkdocs.structure.files import File

    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    return files
