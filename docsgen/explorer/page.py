"""The compatibility explorer page (explorer.md): a filter box and four tables, in Markdown with raw
HTML. The filter is docs/javascripts/explorer.js, the styles docs/stylesheets/explorer.css."""

from __future__ import annotations

from html import escape

from docsgen.explorer.answers import BranchAnswer, GpuBranchAnswer
from docsgen.explorer.gpus import GpuFacts
from docsgen.explorer.grid import grid_table
from docsgen.explorer.tables import branches_table, cuda_table, gpus_table, minor_compat_table
from envbuild.matrix.model import Matrix
from envbuild.resolve.solver import MINOR_COMPAT_COST


def render(
    matrix: Matrix, branches: list[BranchAnswer], facts: list[GpuFacts], grid: list[GpuBranchAnswer]
) -> str:
    frameworks = [fw.display_name for fw in matrix.frameworks]
    parts = [
        # the right-hand table of contents would take a third of the width the tables need; the
        # filter bar carries the links to the sections instead
        "---\nhide:\n  - toc\n---",
        "# Compatibility explorer",
        "Which PyTorch, TensorFlow and JAX builds a driver branch and a GPU can run, generated from "
        "envbuild's matrix (`matrix/`) each time this site is built. Every answer comes from the resolver "
        "`envbuild resolve` runs, so the page and the command agree, and every cell links to the source "
        "its matrix row cites. [Resolution rules](concepts/resolution.md) explains how an answer is "
        "picked: the newest framework release, then the newest CUDA the driver runs, then the newest "
        "Python.",
        _filter_box(matrix),
        "## Driver branches {#branches .explorer-heading}",
        "The best stack of each framework on a current driver of the branch, as `envbuild resolve "
        "--driver BRANCH --framework NAME` answers it; under it, the newer release `--compat minor` "
        f"would give instead. Minor-version compatibility is opt-in: {MINOR_COMPAT_COST}.",
        branches_table(matrix, branches),
        "## GPUs {#gpus .explorer-heading}",
        "Each GPU of the catalogue (`envbuild matrix gpus`): its compute capability, the oldest driver "
        "branch that drives it (the branch of its architecture's first CUDA release), the last branch of "
        "a GPU NVIDIA has retired, and the framework releases whose builds carry kernels for it (SASS for "
        "its capability, or PTX a native driver compiles) on the platform its hosts run.",
        gpus_table(matrix, facts),
        "## CUDA releases and their minimum drivers {#cuda .explorer-heading}",
        "The oldest Linux driver each CUDA toolkit release runs on natively (Table 3 of the CUDA release "
        "notes), newest first. A driver runs a CUDA X.Y natively when it meets the minimum of X.Y's GA "
        "release.",
        cuda_table(matrix),
        "With `--compat minor`, a driver at or above its major's floor also runs the later minor releases "
        "of that major:",
        minor_compat_table(matrix),
        "## GPU × driver branch {#grid .explorer-heading}",
        "What `envbuild resolve --gpu NAME --driver BRANCH` answers: the best stack of each framework "
        "for that GPU on a current driver of the branch. Consecutive branches with the same answer share "
        "a row, and so do the branches that cannot drive the GPU. Jetson modules are left out: their "
        "CUDA comes with JetPack, not with these drivers.",
        grid_table(frameworks, facts, grid),
    ]
    return "\n\n".join(parts) + "\n"


def _filter_box(matrix: Matrix) -> str:
    box = (
        f'<div class="explorer-filter" id="explorer-box" data-matrix-digest="{escape(matrix.digest)}">\n'
        '<label for="explorer-filter">Filter</label>\n'
        '<input id="explorer-filter" type="search" autocomplete="off" spellcheck="false" '
        'placeholder="A GPU or a driver: RTX 4090, H100, 550">\n'
        '<span class="explorer-count" id="explorer-count" aria-live="polite"></span>\n'
        '<span class="explorer-jump"><a href="#branches">Branches</a> · <a href="#gpus">GPUs</a> · '
        '<a href="#cuda">CUDA</a> · <a href="#grid">GPU × branch</a></span>\n'
        "</div>"
    )
    how = (
        "Type a GPU name or a driver branch (`550`, `R550`, or a full version such as `550.54.15`): the "
        "tables keep the rows of that GPU or branch, the GPUs that branch drives and the CUDA majors it "
        "runs with `--compat minor`. Words "
        "combine: `H100 550` leaves the H100 on R550. A link can carry the filter: "
        "`explorer/?filter=RTX+4090`."
    )
    return f"{box}\n\n{how}"
