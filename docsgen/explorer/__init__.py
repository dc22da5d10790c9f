"""The compatibility explorer (explorer.md): the matrix's answers for every driver branch, GPU, and GPU
and branch pair, computed by the resolver `envbuild resolve` runs (answers.py), the GPU catalogue's
floors and kernels (gpus.py), written as one page (page.py).

The page is made on every docs build, so its cost is logged (about 1.5 s here): the matrix is loaded
once, and a resolution is reused only where the answer is provably the same (answers.gpu_branch_answers).
"""

from __future__ import annotations

import logging
import os
import time

LOG = logging.getLogger("mkdocs.docsgen.explorer")
MATRIX_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "matrix"
)


def explorer_page() -> str:
    """The page's Markdown, from the checkout's matrix/ (not ENVBUILD_MATRIX: the site documents the
    matrix the repository ships)."""
    from docsgen.explorer.answers import branch_answers, gpu_branch_answers
    from docsgen.explorer.gpus import gpu_facts
    from docsgen.explorer.page import render
    from envbuild.matrix.load import load_matrix

    started = time.perf_counter()
    matrix = load_matrix(MATRIX_DIR)
    branches = branch_answers(matrix)
    facts = [gpu_facts(matrix, gpu) for gpu in matrix.gpus]
    grid, resolutions = gpu_branch_answers(matrix, [gpu for gpu in matrix.gpus if not gpu.integrated])
    page = render(matrix, branches, facts, grid)
    LOG.info(
        "explorer.md: %d GPU and branch pairs from %d resolutions, %d bytes, in %.2f s",
        len(grid),
        resolutions,
        len(page.encode()),
        time.perf_counter() - started,
    )
    return page
