"""The GPU × driver branch table: per GPU, what `envbuild resolve --gpu NAME --driver BRANCH` answers
on each branch, newest first. Consecutive branches with the same answer share a row (data-branches
lists them), so the table shows where an answer changes; branches that cannot drive the GPU share one
row that says which driver would."""

from __future__ import annotations

from docsgen.explorer.answers import GpuBranchAnswer
from docsgen.explorer.cells import branch_cell, gpu_cell, none_cell, stack_data, stack_text
from docsgen.explorer.gpus import GpuFacts
from docsgen.explorer.markup import cell, link, row, table


def grid_table(frameworks: list[str], facts: list[GpuFacts], answers: list[GpuBranchAnswer]) -> str:
    by_gpu = {f.gpu.name: f for f in facts}
    rows = [_row(run, by_gpu[run[0].gpu.name], len(frameworks)) for run in _runs(answers)]
    summary = f"{len(answers):,} GPU and driver branch pairs: open the table, or type in the filter"
    return (
        f'<details class="abstract explorer-grid">\n<summary>{summary}</summary>\n'
        + table("grid", ["GPU", "Driver", *frameworks], rows, searchable=False)
        + "\n</details>"
    )


def _runs(answers: list[GpuBranchAnswer]) -> list[list[GpuBranchAnswer]]:
    """Consecutive answers for one GPU that say the same."""
    runs: list[list[GpuBranchAnswer]] = []
    for answer in answers:
        if runs and runs[-1][0].gpu is answer.gpu and _same(runs[-1][0], answer):
            runs[-1].append(answer)
        else:
            runs.append([answer])
    return runs


def _same(one: GpuBranchAnswer, other: GpuBranchAnswer) -> bool:
    return one.unsupported == other.unsupported and one.stacks == other.stacks


def _span(run: list[GpuBranchAnswer]) -> str:
    newest, oldest = run[0].branch.branch, run[-1].branch.branch
    return f"R{newest}" if newest == oldest else f"R{oldest} – R{newest}"


def _bound_source(facts: GpuFacts, branch: int) -> str:
    """The source of the bound a branch that cannot drive the GPU misses: its floor's (the CUDA
    release notes) below it, else its last branch's (the GPU row)."""
    floor = facts.floor
    if floor is not None and floor.branch is not None and branch < floor.branch:
        return floor.source
    return facts.last.source if facts.last is not None else facts.gpu.prov.source


def _row(run: list[GpuBranchAnswer], facts: GpuFacts, width: int) -> str:
    first = run[0]
    gpu = first.gpu
    cells = [gpu_cell(gpu), branch_cell(first.branch, label=_span(run))]
    if first.unsupported is not None:
        text = f"cannot drive the {gpu.name}: {first.unsupported}"
        source = _bound_source(facts, first.branch.branch)
        cells.append(cell(link(text, source), data={"colspan": str(width)}, css="explorer-none"))
        css: str | None = "explorer-unsupported"
    else:
        css = None
        for framework, stack in first.stacks:
            if stack is None:
                cells.append(none_cell(framework, gpu.prov.source))
            else:
                cells.append(cell(stack_text(stack, full=False), data=stack_data(stack, brief=True)))
    return row(cells, gpu=gpu.name, branches=[a.branch.branch for a in run], css=css)
