"""Read and check smoke reports: the last stdout line of a smoke program, against smoke/schema.json.

A small validator for the JSON Schema keywords the schema uses (type, enum, required, properties,
additionalProperties, items, minimum, pattern), so envbuild needs no jsonschema dependency; the
tests check the same reports with the jsonschema package too.

`gate_problems` re-judges a report that says it passed, with the smoke programs' own rules (the loss
rule is their function, imported): verify applies it to what a container printed, and promotion to a
report file, so a report cannot say "passed" while its own numbers say otherwise.

`redact_checks` passes the text of the user's own checks (their output, their failures) through
envbuild's one redaction: a self-test may print a token from its environment, and the report reaches
CI logs, record.json and the promoted image's attestations.
"""

from __future__ import annotations

import json
import os
import re

from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.smoke.programs.smoke_common import (
    CHECKS_GATE,
    GATES,
    GPU_GATES,
    LOSSES_KEPT,
    PRECISIONS,
    PROGRESS_PREFIX,
    loss_problem,
)

if TYPE_CHECKING:
    from typing import Any

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def without_progress(text: str) -> str:
    """The smoke program's stderr without its progress lines: what a failed run explains itself with."""
    return "".join(line for line in text.splitlines(True) if not line.startswith(PROGRESS_PREFIX))


def load_schema() -> dict[str, Any]:
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "schema.json")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def _check(value: Any, schema: dict[str, Any], where: str, errors: list[str]) -> None:
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, kind) for kind in kinds):
            errors.append(f"{where}: expected {' or '.join(kinds)}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        errors.append(f"{where}: {value} is below {schema['minimum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where}: missing {key!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                _check(item, properties[key], f"{where}.{key}", errors)
            elif extra is False:
                errors.append(f"{where}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                _check(item, extra, f"{where}.{key}", errors)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{where}[{index}]", errors)


def validate(report: Any, schema: dict[str, Any] | None = None) -> list[str]:
    errors: list[str] = []
    _check(report, schema or load_schema(), "report", errors)
    if (
        isinstance(report, dict)
        and isinstance(report.get("failed"), list)
        and isinstance(report.get("passed"), bool)
    ):
        if report["passed"] == bool(report["failed"]):
            errors.append("report: passed must be true exactly when failed is empty")
        for gate in report.get("gates", {}) if isinstance(report.get("gates"), dict) else ():
            if report["gates"][gate] == "failed" and not any(f.get("gate") == gate for f in report["failed"]):
                errors.append(f"report.gates.{gate}: failed, but no entry in failed names it")
    return errors


# the gates every passing run passes; the others (GPU_GATES, and checks when none are configured) may be
# skipped, with a reason
ALWAYS_PASSED = tuple(gate for gate in GATES if gate not in (*GPU_GATES, CHECKS_GATE))


def gate_problems(
    report: dict[str, Any], device: str, *, checks: tuple[tuple[str, str], ...] | None = None
) -> list[str]:
    """Why `report`, schema-valid, does not show a smoke step that passed on `device`; [] when it does.

    The checks the smoke program made, re-made from what the report carries: no gate failed and the
    gates a passing run always passes did pass; the losses are finite, one per step (the program keeps
    the first and last LOSSES_KEPT / 2 of longer runs) and the loss after training is below the first;
    a known precision; the device asked for is `device`, and a GPU run used a GPU; every check the
    report lists passed, and the checks gate passed exactly when some ran. `checks`: the (kind, name) of
    the checks the run was asked for, when the caller knows them (verify with --smoke-import or
    --smoke-command): the report's checks of each kind asked for must be those, in order. The losses
    in a report are rounded to 6 significant digits, as the program prints them.
    """
    problems: list[str] = []
    if report.get("passed") is not True or report.get("failed"):
        named = "; ".join(f"{f.get('gate')}: {f.get('detail')}" for f in report.get("failed") or [])
        problems.append("report.passed: the smoke step failed" + (f" ({named})" if named else ""))
    gates = report.get("gates") or {}
    for gate, state in gates.items():
        if gate in ALWAYS_PASSED and state != "passed":
            problems.append(f"report.gates.{gate}: {state!r}; a passing smoke step passes it")
        elif not (state == "passed" or str(state).startswith("skipped: ")):
            problems.append(f"report.gates.{gate}: {state!r}")
    steps, losses = report.get("steps"), list(report.get("losses") or [])
    if not isinstance(steps, int) or steps < 1:
        problems.append(f"report.steps: {steps!r}; a smoke step runs 1 or more")
    elif len(losses) != min(steps, LOSSES_KEPT):
        problems.append(f"report.losses: {len(losses)} loss(es) for {steps} step(s)")
    problem = loss_problem(losses, report.get("loss_last"))
    if problem is not None:
        problems.append(f"report.losses: {problem[1]}")
    if report.get("loss_decreased") is not True:
        problems.append(f"report.loss_decreased: {report.get('loss_decreased')!r}")
    if report.get("precision") not in PRECISIONS:
        problems.append(
            f"report.precision: {report.get('precision')!r} is not one of {', '.join(PRECISIONS)}"
        )
    if report.get("device_requested") != device:
        problems.append(f"report.device_requested: {report.get('device_requested')!r}, not {device!r}")
    if device == "gpu":
        kinds = [d.get("kind") for d in report.get("devices") or [] if isinstance(d, dict)]
        if report.get("device_used") in (None, "cpu") or "gpu" not in kinds:
            problems.append(f"report.device_used: {report.get('device_used')!r}; a GPU smoke step uses a GPU")
    problems += check_problems(report, checks)
    return problems


def check_problems(report: dict[str, Any], asked: tuple[tuple[str, str], ...] | None) -> list[str]:
    """gate_problems' part for the user's checks (the `checks` list and gate of a passing report)."""
    entries = [entry for entry in report.get("checks") or [] if isinstance(entry, dict)]
    state = (report.get("gates") or {}).get(CHECKS_GATE)
    problems = [
        f"report.checks: {entry.get('kind')} {entry.get('name')!r} did not pass"
        for entry in entries
        if entry.get("passed") is not True
    ]
    if entries and state != "passed":
        problems.append(f"report.gates.{CHECKS_GATE}: {state!r}, but {len(entries)} check(s) ran")
    if state == "passed" and not entries:
        problems.append(f"report.gates.{CHECKS_GATE}: passed, but no check ran")
    for kind in dict.fromkeys(kind for kind, _ in asked or ()):  # each kind asked for replaced the image's
        ran = [entry.get("name") for entry in entries if entry.get("kind") == kind]
        wanted = [name for named, name in asked or () if named == kind]
        if ran != wanted:
            problems.append(
                f"report.checks: the {kind} checks that ran are {ran}, and the run asked for {wanted}"
            )
    return problems


def redact_checks(report: dict[str, Any]) -> None:
    """The user's checks' text in `report` (their entries, and the failures of the checks gate), redacted
    in place: what a check printed is the only text in a report that no envbuild program wrote."""
    for entry in report.get("checks") or []:
        if isinstance(entry, dict):
            for key in ("name", "output"):
                if isinstance(entry.get(key), str):
                    entry[key] = redact(entry[key])
    for failure in report.get("failed") or []:
        if isinstance(failure, dict) and failure.get("gate") == CHECKS_GATE:
            for key in ("detail", "hint"):
                if isinstance(failure.get(key), str):
                    failure[key] = redact(failure[key])


def parse_report(stdout: str) -> dict[str, Any] | None:
    """The last non-empty stdout line as a JSON object, or None when there is none."""
    for line in reversed(stdout.splitlines()):
        if line.strip():
            try:
                value = parse_json(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None
