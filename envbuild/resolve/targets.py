"""`envbuild resolve -f envbuild.toml [--target NAME]`: each spec target's stack, explained.

The spec's [stack] and [[target]] fields become the query (resolve/spec_query.py, the one render
uses), so the first stack of each section is the one render and lock pick. Flags given beside -f
override the spec's field of the same name for this run and are marked in the section's header, which
makes "what would driver 580 give us?" one command. A GPU of the target that lacks the spec's
[smoke] precision is a warning (resolve/precision.py): on stderr beside the text, in the JSON document's
target as "warnings", the same render prints.
"""

from __future__ import annotations

import json

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.matrix.model import Matrix
from envbuild.resolve.precision import PrecisionWarning, precision_warnings, warning_json
from envbuild.resolve.report import resolution_json, to_text
from envbuild.resolve.solver import Resolution, resolve
from envbuild.resolve.spec_query import FIELDS, query_fields, target_query

if TYPE_CHECKING:
    from typing import Any

    from envbuild.spec.model import Spec


class TargetResolution(Record):
    __slots__ = ("name", "fields", "overridden", "resolution", "warnings")
    name: str
    fields: dict  # build_query's keywords as resolved for this target
    overridden: tuple[str, ...]  # build_query keywords a flag set instead of the spec
    resolution: Resolution
    # the target's GPUs that lack the spec's [smoke] precision: render warns of the same ones
    warnings: tuple[PrecisionWarning, ...]


def resolve_targets(
    matrix: Matrix,
    spec: Spec,
    *,
    target: str | None = None,
    overrides: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[TargetResolution]:
    """One resolution per target (or the one `target` names; an unknown name is a UsageError
    listing the targets)."""
    overridden = tuple(k for k, v in (overrides or {}).items() if v is not None and v != [])
    results = []
    for chosen in spec.target(target):
        where = f"{spec.path} target {chosen.name!r}"
        query = target_query(matrix, chosen.stack, where, overrides=overrides, limit=limit)
        results.append(
            TargetResolution(
                name=chosen.name,
                fields=query_fields(matrix, chosen.stack, overrides),
                overridden=overridden,
                resolution=resolve(matrix, query),
                warnings=precision_warnings(spec.smoke, query.gpus, where),
            )
        )
    return results


def _describe(result: TargetResolution, matrix: Matrix) -> str:
    """ "driver 550, framework torch, gpus H100, ...": the query in the spec's words; a flag's value
    says so ("driver 580 (--driver)"), a defaulted python says whose it is."""
    parts = []
    for keyword, (field, flag) in FIELDS.items():
        value = result.fields.get(keyword)
        if value is None or value == []:
            continue
        if keyword == "os" and result.fields.get("strategy") == "conda" and keyword not in result.overridden:
            continue  # conda builds on micromamba whatever os says
        shown = ", ".join(value) if isinstance(value, list) else value
        if keyword in result.overridden:
            shown += f" ({flag})"
        elif keyword == "python" and result.fields.get("os") in matrix.oses:
            os_row = matrix.oses[result.fields["os"]]
            if shown == f"{os_row.python[0]}.{os_row.python[1]}":
                shown += f" ({os_row.name}'s python3)"
        parts.append(f"{field} {shown}")
    return ", ".join(parts)


def to_text_targets(results: list[TargetResolution], matrix: Matrix, spec: Spec, *, verbose: bool) -> str:
    sections = []
    for result in results:
        header = f"== target {result.name} ({spec.path}): {_describe(result, matrix)}"
        sections.append(header + "\n" + to_text(result.resolution, matrix, verbose=verbose))
    return "\n".join(sections)


def to_json_targets(results: list[TargetResolution], matrix: Matrix, spec: Spec) -> str:
    document = {
        "spec": spec.path,
        "targets": [
            {
                "target": result.name,
                "query": {FIELDS[k][0]: v for k, v in result.fields.items() if k in FIELDS},
                "overridden_by_flags": [FIELDS[k][0] for k in result.overridden if k in FIELDS],
                **resolution_json(result.resolution, matrix),
                "warnings": [warning_json(w) for w in result.warnings],
            }
            for result in results
        ],
    }
    return json.dumps(document, indent=2)
