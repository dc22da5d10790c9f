"""The cells the explorer's tables share: a stack (its version linked to the variant row's source, and
the attributes the tests and scripts read), a GPU, a driver branch."""

from __future__ import annotations

from html import escape

from docsgen.explorer.answers import StackAnswer
from docsgen.explorer.markup import cell, link, words
from envbuild.matrix.model import Branch, Gpu
from envbuild.matrix.versions import format_cc, format_minor, sm_name


def stack_data(stack: StackAnswer, *, brief: bool = False) -> dict[str, str | None]:
    """What a stack cell says, machine-readably: the fields of `resolve --json`'s stack. brief: the
    GPU x branch table's thousands of cells leave out the Python and the compat mode (always native
    there), which its text does not show either."""
    return {
        "data-framework": stack.framework,
        "data-version": stack.version,
        "data-variant": stack.variant,
        "data-cuda": stack.cuda,
        "data-python": None if brief else stack.python,
        "data-compat": None if brief else stack.compat,
    }


def stack_text(stack: StackAnswer, *, full: bool) -> str:
    """ "2.7.1 cu118 · CUDA 11.8", the version linked to the variant row's source. full: the row, the
    stack's Python and minimum driver on hover, and the whole kept on one line in a cell that wraps;
    the GPU x branch table's cells (a few thousand, never wrapped) go without."""
    detail = f"<small>{escape(stack.variant)} · CUDA {escape(stack.cuda)}</small>"
    if not full:
        return f"{link(stack.version, stack.source)} {detail}"
    title = f"{stack.where}: Python {stack.python}, driver >= {stack.min_driver}"
    return f'<span class="explorer-stack">{link(stack.version, stack.source, title=title)} {detail}</span>'


def none_cell(framework: str, source: str, *, title: str | None = None) -> str:
    """No stack: "none", linked to the row that explains why (the branch's CUDA, the GPU's); title:
    resolve's hint, on hover."""
    return cell(link("none", source, title=title), data={"data-framework": framework}, css="explorer-none")


def gpu_cell(gpu: Gpu, *, titled: bool = False) -> str:
    return cell(link(gpu.name, gpu.prov.source, title=gpu.prov.where if titled else None))


def gpu_words(gpu: Gpu) -> str:
    """The words the filter finds a GPU by: its name, aliases, capability and architecture."""
    return words(gpu.name, *gpu.aliases, format_cc(gpu.cc), sm_name(gpu.cc), gpu.architecture or "")


def branch_cell(branch: Branch, *, label: str | None = None, described: bool = False) -> str:
    """R550 (or a span of branches, `label`) linked to the branch row's source; described: under it,
    the newest CUDA it runs natively, its type and its end of life, as that row gives them."""
    text = link(
        label or f"R{branch.branch}", branch.prov.source, title=branch.prov.where if described else None
    )
    if described:
        facts = [f"CUDA {format_minor(branch.native_cuda)}", branch.type] + (
            [f"EOL {branch.eol}"] if branch.eol else []
        )
        text += f"<br><small>{escape(' · '.join(facts))}</small>"
    return cell(text)
