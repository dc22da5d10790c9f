"""The explorer's answers, asked of the resolver `envbuild resolve` runs: the same query builder, the
same solver and the same --json document (envbuild.resolve.report.resolution_json), so a cell of the
page and the command cannot disagree.

Two questions are asked: per driver branch and framework, `envbuild resolve --driver BRANCH
--framework NAME` (its first stack, and what --compat minor would give instead); per GPU and branch,
`envbuild resolve --gpu NAME --driver BRANCH` (the first stack of each framework). The second is ~5,000
queries, so only ~300 are resolved: a branch that cannot drive the GPU is answered by the check that
makes resolve() return no stack, and one resolution serves the GPUs whose rows differ only in what the
resolver never chooses by (`gpu_branch_answers`).
"""

from __future__ import annotations

from typing import Any

from envbuild._util.record import Record
from envbuild.matrix.model import Branch, Gpu, Matrix, Provenance
from envbuild.matrix.support import unsupported
from envbuild.matrix.versions import format_minor
from envbuild.resolve.query import build_query
from envbuild.resolve.report import resolution_json
from envbuild.resolve.solver import Resolution, Stack, resolve


class StackAnswer(Record):
    """One stack as `resolve --json` prints it, with the matrix row it rests on."""

    __slots__ = (
        "framework",
        "version",
        "variant",
        "cuda",
        "python",
        "compat",
        "min_driver",
        "source",
        "where",
    )
    framework: str
    version: str
    variant: str
    cuda: str
    python: str
    compat: str  # native | minor
    min_driver: str
    source: str  # the URL the framework file's variant row cites (which CUDA builds exist, their archs)
    where: str  # that row: "frameworks/torch.toml [[release]] 2.7.0 variant cu118"


class FrameworkAnswer(Record):
    """`resolve --driver BRANCH --framework NAME`: its first stack, and the newer release --compat
    minor gives (with_minor_compat), or why nothing resolves."""

    __slots__ = ("framework", "best", "with_minor", "closest")
    framework: str
    best: StackAnswer | None
    with_minor: StackAnswer | None
    closest: str | None  # no stack: the closest miss and what would allow it


class BranchAnswer(Record):
    __slots__ = ("branch", "frameworks")
    branch: Branch
    frameworks: tuple[FrameworkAnswer, ...]  # the matrix's framework order


class GpuBranchAnswer(Record):
    """`resolve --gpu NAME --driver BRANCH`: the first stack per framework (None: that framework has
    none), or, when the branch cannot drive the GPU at all, the fix the resolver gives."""

    __slots__ = ("gpu", "branch", "stacks", "unsupported")
    gpu: Gpu
    branch: Branch
    stacks: tuple[tuple[str, StackAnswer | None], ...]  # (framework, its best stack), matrix order
    unsupported: str | None  # "install an R520 or later driver"


def branches_newest_first(matrix: Matrix) -> list[Branch]:
    return [matrix.branches[b] for b in sorted(matrix.branches, reverse=True)]


def branch_answers(matrix: Matrix) -> list[BranchAnswer]:
    """Every driver branch the matrix knows, newest first, each framework asked on its own."""
    answers = []
    for branch in branches_newest_first(matrix):
        per_framework = []
        for framework in matrix.frameworks:
            query = build_query(matrix, driver=str(branch.branch), frameworks=[framework.name])
            resolution = resolve(matrix, query)
            document = resolution_json(resolution, matrix)
            best = _answer(document["stacks"][0], resolution.stacks[0]) if resolution.stacks else None
            minor = resolution.with_minor_compat.get(framework.name)
            closest = document["closest"][0] if document["closest"] else None
            per_framework.append(
                FrameworkAnswer(
                    framework=framework.name,
                    best=best,
                    with_minor=_answer(document["with_minor_compat"][framework.name], minor)
                    if minor is not None
                    else None,
                    closest=_closest_text(closest) if closest else None,
                )
            )
        answers.append(BranchAnswer(branch=branch, frameworks=tuple(per_framework)))
    return answers


def gpu_branch_answers(matrix: Matrix, gpus: list[Gpu]) -> tuple[list[GpuBranchAnswer], int]:
    """Every (GPU, branch) pair, GPUs in the order given, branches newest first; and how many
    resolutions it took.

    Two shortcuts, each giving what the resolution would: a branch that cannot drive the GPU gets the
    fix of `support.unsupported`, the check resolve() itself makes before it returns no stack at all
    (solver.resolve: `if problems: stacks = []`); and GPUs the resolver cannot tell apart share one
    resolution per branch (`_choice_facts`)."""
    memo: dict[tuple[object, ...], tuple[Resolution, dict[str, Any]]] = {}
    answers = []
    for gpu in gpus:
        for branch in branches_newest_first(matrix):
            query = build_query(matrix, driver=str(branch.branch), gpus=[gpu.name])
            miss = unsupported(matrix, query.gpus[0], query.driver)
            if miss is not None:
                answers.append(GpuBranchAnswer(gpu=gpu, branch=branch, stacks=(), unsupported=miss.fix))
                continue
            key = (branch.branch, query.platform, tuple(_choice_facts(g) for g in query.gpus))
            if key not in memo:
                resolution = resolve(matrix, query)
                memo[key] = resolution, resolution_json(resolution, matrix)
            answers.append(_gpu_answer(matrix, gpu, branch, *memo[key]))
    return answers, len(memo)


# What a GPU row says beside the facts the resolver chooses by. The resolver reads a GPU's name,
# aliases, architecture, integrated_stack and provenance only to word its messages and caveats (which
# GPU a rejection names, its source's confidence), never to pick or reject a stack; and it never reads
# segment, memory_gb, data_center, bf16 or fp16 (bf16/fp16 are `resolve -f`'s precision warning, which
# `resolve --gpu` does not give). Two GPUs equal in every other field get the same stacks from the
# same query, so one resolution answers both. The page shows stacks, never those words; a new Gpu
# field is a choice fact until it is named here, so adding one can only split the reuse, not merge it.
_WORDING_ONLY = {
    "name": "",
    "aliases": (),
    "architecture": "",
    "integrated_stack": None,
    "prov": Provenance(where="", source="", confidence=None, note=None),
    "segment": None,
    "memory_gb": (),
    "data_center": False,
    "bf16": False,
    "fp16": False,
}


def _choice_facts(gpu: Gpu) -> Gpu:
    return gpu.replace(**_WORDING_ONLY)  # type: ignore[return-value]


def _gpu_answer(
    matrix: Matrix, gpu: Gpu, branch: Branch, resolution: Resolution, document: dict[str, Any]
) -> GpuBranchAnswer:
    if resolution.problems:  # unsupported() said the branch drives the GPU: the two checks disagree
        raise AssertionError(f"{gpu.name} on R{branch.branch}: {resolution.problems[0]}")
    found = {
        stack.framework.name: _answer(fields, stack)
        for fields, stack in zip(document["stacks"], resolution.stacks, strict=True)
    }
    stacks = tuple((fw.name, found.get(fw.name)) for fw in matrix.frameworks)
    return GpuBranchAnswer(gpu=gpu, branch=branch, stacks=stacks, unsupported=None)


def _answer(fields: dict[str, Any], stack: Stack) -> StackAnswer:
    """A stack of the --json document (`fields`), with the provenance of the Stack it was made from.
    A with_minor_compat entry prints no framework, python or compat field: the Stack holds those."""
    return StackAnswer(
        framework=fields.get("framework", stack.framework.name),
        version=fields["framework_version"],
        variant=fields["variant"],
        cuda=fields["cuda"],
        python=fields.get("python", format_minor(stack.python)),
        compat=fields.get("compat", stack.mode),
        min_driver=fields["min_driver"],
        source=stack.variant.prov.source,
        where=f"{stack.release.prov.where} variant {stack.variant.name}",
    )


def _closest_text(miss: dict[str, Any]) -> str:
    """ "a driver >= 450.80.02 would allow torch 1.12.1+cu113", as resolve's text output says it."""
    relax = " and ".join(miss["relax"])
    return f"{relax} would allow {miss['candidate']}" if relax else f"{miss['candidate']}: {miss['reason']}"
