"""The explorer's reference tables: driver branches (best stack per framework, and what --compat minor
adds), the GPU catalogue (floor, last branch, releases with kernels), CUDA releases and their minimum
drivers. Every cell links to the source its matrix row cites."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from docsgen.explorer.answers import BranchAnswer, FrameworkAnswer
from docsgen.explorer.cells import branch_cell, gpu_cell, gpu_words, none_cell, stack_data, stack_text
from docsgen.explorer.gpus import GpuFacts, ReleaseRun
from docsgen.explorer.markup import attrs, cell, link, row, table
from envbuild.matrix.model import Branch, Framework, Matrix
from envbuild.matrix.versions import format_cc, format_driver, format_minor, parse_driver


def branches_table(matrix: Matrix, answers: list[BranchAnswer]) -> str:
    headers = ["Driver", *(fw.display_name for fw in matrix.frameworks)]
    return table("branches", headers, (_branch_row(answer) for answer in answers))


def _branch_row(answer: BranchAnswer) -> str:
    branch = answer.branch
    cells = [branch_cell(branch, described=True), *(_framework_cell(fw, branch) for fw in answer.frameworks)]
    return row(cells, branches=[branch.branch])


def _framework_cell(answer: FrameworkAnswer, branch: Branch) -> str:
    if answer.best is None:
        title = answer.closest or f"R{branch.branch} runs CUDA <= {format_minor(branch.native_cuda)}"
        return none_cell(answer.framework, branch.prov.source, title=title)
    inner = stack_text(answer.best, full=True)
    if answer.with_minor is not None:
        minor = answer.with_minor
        inner += (
            f'<span class="explorer-minor"{attrs(stack_data(minor))}>'
            f"<small>with --compat minor:</small> {stack_text(minor, full=True)}</span>"
        )
    return cell(inner, data=stack_data(answer.best))


def gpus_table(matrix: Matrix, facts: list[GpuFacts]) -> str:
    headers = ["GPU", "Compute capability", "Driver floor", "Last branch"]
    headers += [f"{fw.display_name} releases with kernels" for fw in matrix.frameworks]
    return table("gpus", headers, (_gpu_row(f) for f in facts))


def _gpu_row(facts: GpuFacts) -> str:
    gpu = facts.gpu
    capability = f"{format_cc(gpu.cc)} · {gpu.architecture}" if gpu.architecture else format_cc(gpu.cc)
    cells = [gpu_cell(gpu, titled=True), cell(link(capability, gpu.prov.source))]
    words = {"data-gpu-words": gpu_words(gpu)}
    if gpu.integrated:
        what = f"not resolved: {gpu.integrated_stack or 'JetPack'}"
        span = {"colspan": str(2 + len(facts.kernels))}
        cells.append(cell(link(what, gpu.prov.source), data=span, css="explorer-none"))
        return row(cells, gpu=gpu.name, data=words, css="explorer-unsupported")
    floor = facts.floor
    if floor is None:
        cells.append(cell(link("every branch here", gpu.prov.source)))
    elif floor.branch is None:
        cells.append(cell(link(f"none known ({floor.why})", floor.source)))
    else:
        cells.append(cell(link(f"R{floor.branch}", floor.source) + f" <small>{escape(floor.why)}</small>"))
    if facts.last is None:
        cells.append(cell(link("current", gpu.prov.source)))
    else:
        cells.append(cell(link(f"R{facts.last.branch}", facts.last.source, title=facts.last.why)))
    cells += [_kernels_cell(fw, runs) for fw, runs in facts.kernels]
    return row(cells, gpu=gpu.name, branches=facts.driven_by, data=words)


def _kernels_cell(framework: Framework, runs: tuple[ReleaseRun, ...]) -> str:
    if not runs:
        return none_cell(framework.name, framework.prov.source)
    parts = []
    for run in runs:
        newest = link(run.newest.version, run.newest.prov.source)
        parts.append(
            newest if run.count == 1 else f"{link(run.oldest.version, run.oldest.prov.source)} – {newest}"
        )
    data = {
        "data-framework": framework.name,
        "data-newest": runs[0].newest.version,
        "data-oldest": runs[-1].oldest.version,
    }
    return cell("<br>".join(parts), data=data)


def cuda_table(matrix: Matrix) -> str:
    return table("cuda", ["CUDA", "Release", "Minimum Linux driver"], _cuda_rows(matrix))


def _cuda_rows(matrix: Matrix) -> Iterable[str]:
    for release in sorted(matrix.cuda, key=lambda r: r.version, reverse=True):
        version = ".".join(str(p) for p in release.version)
        prov = release.prov
        floor = format_driver(release.min_driver) if release.min_driver else "not recorded"
        confidence = f" <small>{escape(prov.confidence)}</small>" if prov.confidence else ""
        cells = [
            cell(link(version, prov.source, title=prov.where)),
            cell(link(release.label, prov.source)),
            cell(
                link(floor, prov.source, title=prov.note) + confidence,
                data={"data-min-driver": floor if release.min_driver else None},
            ),
        ]
        yield row(
            cells, branches=[release.min_driver[0]] if release.min_driver else (), data={"data-cuda": version}
        )


def minor_compat_table(matrix: Matrix) -> str:
    """Per CUDA major, its minor-version-compatibility floor; a row answers for the branches at or
    above it (the resolver's rule: a current driver of the branch meets the floor)."""
    rows = []
    for major in sorted(matrix.minor_compat, reverse=True):
        floor = matrix.minor_compat[major]
        source = floor.prov.source
        meeting = [b for b in sorted(matrix.branches) if parse_driver(str(b)).at_least(floor.min_driver)]
        rows.append(
            row(
                [
                    cell(link(f"{major}.x", source)),
                    cell(link(format_driver(floor.min_driver), source, title=floor.prov.note)),
                ],
                branches=meeting,
            )
        )
    return table("minor-compat", ["CUDA", "Minimum driver with --compat minor"], rows)
