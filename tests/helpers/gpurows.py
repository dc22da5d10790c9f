"""Editing gpus.toml rows in a matrix copy, for tests about a GPU the catalogue lacks."""

from __future__ import annotations

import re
from pathlib import Path

from envbuild.matrix.gpunames import name_key


def without_gpu_row(matrix_dir: Path, name: str) -> Path:
    """The copy without the [[gpu]] row `name` names (compared as a name key), when it has one: the
    test then stays true once the catalogue lists the GPU."""
    gpus = matrix_dir / "gpus.toml"
    blocks = re.split(r"(?m)^(?=\[\[gpu\]\])", gpus.read_text())
    kept = [
        b
        for b in blocks
        if not (m := re.search(r'(?m)^name = "([^"]+)"', b)) or name_key(m.group(1)) != name_key(name)
    ]
    gpus.write_text("".join(kept))
    return matrix_dir
