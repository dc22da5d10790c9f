"""Read and check smoke reports: the last stdout line of a smoke program, against smoke/schema.json.

A small validator for the JSON Schema keywords the schema uses (type, enum, required, properties,
additionalProperties, items, minimum, pattern), so envbuild needs no jsonschema dependency; the
tests check the same reports with the jsonschema package too.
"""

from __future__ import annotations

import json
import os
import re

from envbuild._util.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


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


def parse_report(stdout: str) -> dict[str, Any] | None:
    """The last non-empty stdout line as a JSON object, or None when there is none."""
    for line in reversed(stdout.splitlines()):
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None
