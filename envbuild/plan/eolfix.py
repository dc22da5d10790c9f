"""A way out of an end-of-life nvidia/cuda base image that is checked against the spec.

matrix/lifecycle.py knows the images and the branches, not the spec: its fix names the nearest
supported release and the driver it needs. For a spec target that is not enough to be true. The
TensorFlow example on R535 was told `set cuda = "13.0"`, which resolves to nothing on R535 (exit 3).
Here every suggestion is planned like render plans it (the resolver, the spec's own checks) before it
is offered: first the newest supported release the target's driver runs, then the smallest driver
upgrade to a supported branch after which the target resolves onto a base image with no warning.
"""

from __future__ import annotations

import datetime

from envbuild._util.record import Record
from envbuild.errors import EnvbuildError
from envbuild.matrix.cuda_tags import parse_cuda_tag
from envbuild.matrix.lifecycle import base_image_warning, image_lifecycle, supported_branches
from envbuild.matrix.model import Matrix
from envbuild.matrix.versions import format_minor, parse_driver
from envbuild.oci.reference import parse_reference
from envbuild.plan.plan import Plan, build_plan
from envbuild.plan.strategy import strategy_for
from envbuild.spec.model import Spec, Target


class Advice(Record):
    """A base-image warning and its fix; `edits`: the stack fields the fix sets, already checked to
    resolve (empty when the fix could not be checked against a spec)."""

    __slots__ = ("state", "message", "fix", "edits")
    state: str
    message: str
    fix: str
    edits: tuple[tuple[str, str], ...]


def _plan(matrix: Matrix, spec: Spec, target: Target, edits: dict[str, str]) -> Plan | None:
    """The target's plan with `edits` applied to its stack, or None when it does not plan."""
    try:
        return build_plan(matrix, spec, target.replace(stack=target.stack.replace(**edits)))
    except EnvbuildError:
        return None


def _image(reference: str) -> str:
    parsed = parse_reference(reference)
    return f"{parsed.repository}:{parsed.tag}"


def _where(spec: Spec, target: Target) -> str:
    """Which table to edit: [stack] for a spec without [[target]] tables."""
    return "[stack]" if [t.name for t in spec.targets] == ["default"] else f"[[target]] {target.name!r}"


def _outcome(plan: Plan) -> str:
    stack = plan.stack
    return f"{stack.framework.name} {stack.release.version} on {plan.base_image}"


def base_image_advice(
    matrix: Matrix, spec: Spec, target: Target, reference: str, day: datetime.date
) -> Advice | None:
    """The warning for `reference`, the base image locked for `target`, with a fix that resolves;
    None when the image draws no warning."""
    warning = base_image_warning(matrix, reference, day)
    if warning is None:
        return None
    generic = Advice(state=warning.state, message=warning.message, fix=warning.fix, edits=())
    tag = parse_cuda_tag(parse_reference(reference).tag)
    advanceable = strategy_for(target.stack.strategy).cuda_base_image
    if not advanceable or warning.state == "superseded" or tag is None:
        return generic  # superseded: `envbuild lock` takes the newest point release, as it says
    current = _plan(matrix, spec, target, {})
    if current is None or _image(current.base_image) != _image(reference):
        return generic  # locked with --base-image, or the spec changed since: nothing to check against
    where = _where(spec, target)
    releases = sorted(
        {
            format_minor(i.cuda[:2])
            for i in matrix.images
            if tag.os in (i.cudnn_os if tag.cudnn else i.os)
            and image_lifecycle(matrix, i.cuda, day).state in ("supported", "ending")
        },
        key=lambda text: tuple(int(p) for p in text.split(".")),
        reverse=True,
    )
    driver = parse_driver(target.stack.driver)
    for cuda in releases:  # the newest supported release this driver runs, if the target has one
        plan = _plan(matrix, spec, target, {"cuda": cuda})
        if plan is not None and base_image_warning(matrix, plan.base_image, day) is None:
            return Advice(
                state=warning.state,
                message=warning.message,
                fix=f'set cuda = "{cuda}" in {where}, the newest supported release driver '
                f"{target.stack.driver} runs for this target ({_outcome(plan)}), and run `envbuild lock`",
                edits=(("cuda", cuda),),
            )
    for branch in supported_branches(matrix, day):  # the smallest upgrade that resolves
        if branch.branch <= driver.branch:
            continue
        attempts = [{"driver": str(branch.branch)}]
        attempts += [{"driver": str(branch.branch), "cuda": cuda} for cuda in releases]
        for edits in attempts:
            plan = _plan(matrix, spec, target, edits)
            if plan is None or base_image_warning(matrix, plan.base_image, day) is not None:
                continue
            settings = " and ".join(f'{key} = "{value}"' for key, value in edits.items())
            return Advice(
                state=warning.state,
                message=warning.message,
                fix=f"upgrade the driver to R{branch.branch} ({branch.type}, supported until {branch.eol}) "
                f"or later: no supported release resolves for this target on driver "
                f"{target.stack.driver}. Then set {settings} in {where} ({_outcome(plan)}) and run "
                "`envbuild lock`",
                edits=tuple(edits.items()),
            )
    return Advice(
        state=warning.state,
        message=warning.message,
        fix="no supported base image resolves for this target on any supported driver branch: keep "
        "this lock and mirror its base image into your own registry (`envbuild lock --base-image`), "
        "or relax framework, python or gpus",
        edits=(),
    )


def lock_advice(
    matrix: Matrix, spec: Spec, images: list[tuple[str, str]], day: datetime.date
) -> list[tuple[str, Advice]]:
    """(target name, advice) for every locked base image that draws a warning."""
    targets = {t.name: t for t in spec.targets}
    found = []
    for name, reference in images:
        target = targets.get(name)
        if target is None:
            warning = base_image_warning(matrix, reference, day)
            advice = warning and Advice(
                state=warning.state, message=warning.message, fix=warning.fix, edits=()
            )
        else:
            advice = base_image_advice(matrix, spec, target, reference, day)
        if advice is not None:
            found.append((name, advice))
    return found
