"""A spec target's stack as a resolver Query: what `render` resolves and `resolve -f` explains.

One function builds it for both, so the stack `resolve -f` ranks first is the one render picks, and
both refuse a Python the target's OS cannot give it (resolve/python_source.py) with the same words. A bad
value read from the spec is named as the spec's field (`gpus = 'L44'`), not as a flag the user never
typed; a value given as a flag (`resolve -f ... --driver 580`) keeps its flag's name.
"""

from __future__ import annotations

import re

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.matrix.versions import format_minor
from envbuild.resolve.python_source import python_source
from envbuild.resolve.query import Query, build_query

if TYPE_CHECKING:
    from typing import Any

    from envbuild.spec.model import StackSpec

# build_query's keyword -> (the spec's field, the resolve flag)
FIELDS = {
    "driver": ("driver", "--driver"),
    "frameworks": ("framework", "--framework"),
    "gpus": ("gpus", "--gpu"),
    "strategy": ("strategy", "--strategy"),
    "os": ("os", "--os"),
    "python": ("python", "--python"),
    "cuda": ("cuda", "--cuda"),
    "compat": ("compat", "--compat"),
    "platform": ("platform", "--platform"),
}
_FLAG_RE = re.compile(r"^(--(?:driver|gpu|framework|python|cuda|compat|strategy|os|platform)) ")


def query_fields(matrix: Matrix, stack: StackSpec, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """build_query's keywords for a target: its stack, with `overrides` (build_query's keywords,
    None values left out) on top. An unset python is the OS's own python3 (conda: the newest the
    build supports), as render installs it."""
    fields: dict[str, Any] = {
        "driver": stack.driver,
        "gpus": list(stack.gpus),
        "frameworks": [stack.framework],
        "python": stack.python,
        "cuda": stack.cuda,
        "compat": stack.compat,
        "strategy": stack.strategy,
        "os": stack.os,
        "platform": stack.platforms[0] if stack.platforms else None,
    }
    fields.update({k: v for k, v in (overrides or {}).items() if v is not None and v != []})
    os_row = matrix.oses.get(fields["os"])
    if fields["python"] is None and fields["strategy"] != "conda" and os_row is not None:
        fields["python"] = format_minor(os_row.python)  # the OS's own python3: no third-party source
    return fields


def target_query(
    matrix: Matrix,
    stack: StackSpec,
    where: str,
    *,
    overrides: dict[str, Any] | None = None,
    limit: int | None = 1,
    platform: str | None = None,
) -> Query:
    """The Query for one target; `where` ("envbuild.toml target 'h100'") starts every error.

    `platform`: the one of the target's platforms to resolve for (render's plan passes its own); None:
    a --platform override, else the spec's first platform, else what the GPUs imply."""
    given = {k for k, v in (overrides or {}).items() if v is not None and v != []}
    fields = query_fields(matrix, stack, overrides)
    if platform is not None:
        fields["platform"] = platform
    if fields["os"] not in matrix.oses and "os" not in given:
        raise UsageError(
            f"{where}: os = {fields['os']!r} is not an OS envbuild renders images for",
            fix=f"use one of: {', '.join(matrix.oses)}",
        )
    try:
        query = build_query(matrix, **fields, limit=limit)
    except UsageError as exc:
        match = _FLAG_RE.match(exc.message)
        if match is None:
            raise
        keyword = next(k for k, (_, flag) in FIELDS.items() if flag == match.group(1))
        if keyword in given:
            raise
        field = FIELDS[keyword][0]
        raise UsageError(f"{where}: {field} = {exc.message[match.end() :]}", fix=exc.fix) from None
    # render's rule for where the Python comes from, here so that `resolve -f` refuses what render
    # would refuse, with render's words (plan/plan.py reads the source from the same function)
    python_source(
        matrix,
        os_name=query.os or fields["os"],
        python=format_minor(query.python) if query.python else None,
        strategy=fields["strategy"],
        opt_in=stack.python_source,
        where=where,
    )
    return query
