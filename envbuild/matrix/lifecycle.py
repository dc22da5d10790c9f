"""How long an nvidia/cuda base image will stay pullable, from NVIDIA's support policy.

NVIDIA deletes nvidia/cuda tags six months after the driver branch they shipped with reaches end of
life, and keeps only the newest point release of each CUDA minor. A lock pins its base by digest, but
a deleted tag takes its manifests with it, so a lock that builds today can stop building overnight.
`lock --check` and `doctor --lock` use this module to say so early and to name where to move.
"""

from __future__ import annotations

import calendar
import datetime
import os
from collections.abc import Iterable

from envbuild._util.record import Record
from envbuild.errors import UsageError
from envbuild.matrix.cuda_tags import CudaTag, parse_cuda_tag
from envbuild.matrix.model import Branch, Image, Matrix
from envbuild.matrix.versions import format_driver, format_minor
from envbuild.oci.reference import parse_reference

ENDING_SOON_DAYS = 90  # warn this long before an image set reaches end of life


class Lifecycle(Record):
    """Where one nvidia/cuda release stands on a given day.

    state: supported | ending (EOL within ENDING_SOON_DAYS) | eol (past EOL, tags still due to exist)
           | deletion-due (past the deletion date; may be gone any day) | deleted (a refresh saw it gone)
           | superseded (an older point release of a maintained minor) | unknown (no EOL on record)
    """

    __slots__ = ("state", "cuda", "eol", "delete_on", "deleted", "branch", "row")
    state: str
    cuda: tuple[int, int, int]
    eol: datetime.date | None
    delete_on: datetime.date | None
    deleted: str | None
    branch: int | None  # the driver branch whose EOL the image inherits
    row: Image | None  # the matrix row for this release (for superseded: the row that replaces it)


def today() -> datetime.date:
    """The day lifecycle verdicts are for: ENVBUILD_TODAY (YYYY-MM-DD, for reproducible CI) or today."""
    override = os.environ.get("ENVBUILD_TODAY")
    if not override:
        return datetime.date.today()
    try:
        return datetime.date.fromisoformat(override)
    except ValueError:
        raise UsageError(
            f"ENVBUILD_TODAY={override!r} is not a date", fix="use YYYY-MM-DD, e.g. 2026-11-29, or unset it"
        ) from None


def end_of_month(month: str) -> datetime.date:
    """ "2026-06" -> 2026-06-30: an EOL month is supported until its last day."""
    year, number = (int(p) for p in month.split("-")[:2])
    return datetime.date(year, number, calendar.monthrange(year, number)[1])


def add_months(day: datetime.date, months: int) -> datetime.date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return datetime.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def image_eol(matrix: Matrix, image: Image) -> tuple[datetime.date | None, int | None]:
    """(EOL day, inherited driver branch or None): the row's own `eol`, else its driver branch's."""
    if image.eol:
        return end_of_month(image.eol), None
    dated = [b for b in matrix.branches.values() if b.native_cuda == image.cuda[:2] and b.eol]
    if not dated:
        return None, None
    branch = max(dated, key=lambda b: b.eol or "")
    return end_of_month(branch.eol or ""), branch.branch


def image_lifecycle(matrix: Matrix, cuda: tuple[int, int, int], day: datetime.date) -> Lifecycle:
    rows = [i for i in matrix.images if i.cuda[:2] == cuda[:2]]
    exact = next((i for i in rows if i.cuda == cuda), None)
    if exact is None:
        newer = [i for i in rows if i.cuda > cuda]
        if newer:
            return Lifecycle(
                state="superseded",
                cuda=cuda,
                eol=None,
                delete_on=None,
                deleted=None,
                branch=None,
                row=max(newer, key=lambda i: i.cuda),
            )
        return Lifecycle(
            state="unknown", cuda=cuda, eol=None, delete_on=None, deleted=None, branch=None, row=None
        )
    eol, branch = image_eol(matrix, exact)
    months = matrix.image_policy.delete_after_months if matrix.image_policy else 6
    delete_on = add_months(eol, months) if eol else None
    if exact.deleted:
        state = "deleted"
    elif eol is None:
        state = "unknown"
    elif delete_on is not None and day > delete_on:
        state = "deletion-due"
    elif day > eol:
        state = "eol"
    elif (eol - day).days <= ENDING_SOON_DAYS:
        state = "ending"
    else:
        state = "supported"
    return Lifecycle(
        state=state, cuda=cuda, eol=eol, delete_on=delete_on, deleted=exact.deleted, branch=branch, row=exact
    )


def nearest_supported(matrix: Matrix, tag: CudaTag, day: datetime.date) -> Image | None:
    """The closest release at or above `tag` that is neither deleted nor past EOL and still offers
    the same flavor on the same OS; the same CUDA major first, since minor-version compatibility
    keeps the driver requirement of that major."""
    candidates = []
    for image in matrix.images:
        offers = image.cudnn_os if tag.cudnn else image.os
        if image.cuda <= tag.cuda or tag.os not in offers:
            continue
        if image_lifecycle(matrix, image.cuda, day).state in ("supported", "ending"):
            candidates.append(image)
    if not candidates:
        return None
    return min(candidates, key=lambda i: (i.cuda[0] != tag.cuda[0], i.cuda))


class BaseImageWarning(Record):
    __slots__ = ("state", "message", "fix")
    state: str
    message: str
    fix: str


def base_image_warning(matrix: Matrix, reference: str, day: datetime.date) -> BaseImageWarning | None:
    """A warning for a lock's base image when its nvidia/cuda tag is past EOL, ending or deleted;
    None for supported tags and for images that are not nvidia/cuda."""
    try:
        parsed = parse_reference(reference)
    except UsageError:
        return None
    repository = matrix.image_policy.repository if matrix.image_policy else "nvidia/cuda"
    if not any(
        parsed.repository == r or parsed.repository.endswith(f"/{r}") for r in {repository, "nvidia/cuda"}
    ):
        return None  # mirrors (registry.corp/nvidia/cuda) keep NVIDIA's tag names and its EOL
    tag = parse_cuda_tag(parsed.tag)
    if tag is None:
        return None
    life = image_lifecycle(matrix, tag.cuda, day)
    shown = f"{parsed.repository}:{parsed.tag}"
    if life.state in ("supported", "unknown"):
        return None
    if life.state == "superseded" and life.row is not None:
        replacement = tag.with_release(life.row)
        return BaseImageWarning(
            state=life.state,
            message=f"base image {shown} is an old point release: NVIDIA maintains only the newest of each "
            f"minor ({format_minor(life.row.cuda)}), and deletes the others",
            fix=f"move to {parsed.repository}:{replacement}: run `envbuild lock`, which takes the newest "
            f"point release of CUDA {format_minor(tag.cuda[:2])}",
        )
    inherited = f", with driver branch R{life.branch}" if life.branch else ""
    if life.state == "deleted":
        message = f"base image {shown} was deleted from the registry (seen gone {life.deleted})"
    elif life.state == "deletion-due":
        message = (
            f"base image {shown} is past end of life ({life.eol}{inherited}) and past NVIDIA's deletion "
            f"date ({life.delete_on}): it can disappear any day, and then this lock cannot build"
        )
    elif life.state == "eol":
        message = (
            f"base image {shown} is past end of life ({life.eol}{inherited}); NVIDIA deletes EOL tags "
            f"after {matrix.image_policy.delete_after_months if matrix.image_policy else 6} months "
            f"(due {life.delete_on})"
        )
    else:
        message = f"base image {shown} reaches end of life on {life.eol}{inherited}"
    target = nearest_supported(matrix, tag, day)
    if target is None:
        fix = (
            f"no supported {parsed.repository} release offers this flavor on {tag.os}: pick another "
            f"[stack] os and run `envbuild lock`, or mirror the image into your own registry"
        )
    else:
        floor = matrix.ga_floor.get(target.cuda[:2])
        needs = ""
        if floor and floor.min_driver:
            minor = format_minor(target.cuda[:2])
            needs = f" (CUDA {minor} needs driver >= {format_driver(floor.min_driver)})"
        fix = (
            f"move to the nearest supported release {parsed.repository}:{tag.with_release(target)}{needs}: "
            f'set cuda = "{format_minor(target.cuda[:2])}" in [stack] and run `envbuild lock`'
        )
    return BaseImageWarning(state=life.state, message=message, fix=fix)


def base_image_warnings(
    matrix: Matrix, images: Iterable[tuple[str, str]], day: datetime.date
) -> list[tuple[str, BaseImageWarning]]:
    """(name, warning) for every (name, base image) whose nvidia/cuda tag is past EOL, ending or gone:
    a lock's targets, for `envbuild lock` and `lock --check`.

    Warnings, not failures: such a lock still builds until NVIDIA deletes the tag, and the team
    should hear about it before that day, not on it."""
    found = []
    for name, reference in images:
        warning = base_image_warning(matrix, reference, day)
        if warning:
            found.append((name, warning))
    return found


def supported_branches(matrix: Matrix, day: datetime.date) -> list[Branch]:
    """Production and long-term branches (PB, LTSB) whose end of life is on record and after `day`,
    oldest first: the branches a driver upgrade can honestly be pointed at. New feature branches
    are left out (short-lived by design), as are branches whose end of life nobody published."""
    rows = [
        b
        for b in matrix.branches.values()
        if b.type in ("LTSB", "PB") and b.eol and end_of_month(b.eol) >= day
    ]
    return sorted(rows, key=lambda b: b.branch)


def current_lts(matrix: Matrix, day: datetime.date) -> Branch | None:
    """The newest long-term support branch still supported on `day` (R620 on 2026-11-30), or None
    when every LTSB in the matrix has ended: what `envbuild init` starts a spec from."""
    lts = [b for b in supported_branches(matrix, day) if b.type == "LTSB"]
    return lts[-1] if lts else None
