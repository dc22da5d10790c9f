"""reference/envbuild-toml.md: every table and key of envbuild.toml, from the spec's own declarations.

envbuild.spec.keys declares each key once (type, default, accepted values, meaning), and the reader
takes its list of accepted keys from there; tests/unit/test_spec_keys.py holds each declared default
and accepted value to what the reader does. This page only lays the declarations out.
"""

from __future__ import annotations

import json
from typing import Any

from docsgen import markdown as md


def toml_value(value: Any) -> str:
    """A value as TOML writes it inline (the examples and defaults are strings, numbers, booleans,
    lists and tables of those)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def toml_key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else json.dumps(key)


def default_cell(key: Any) -> str:
    from envbuild.spec import keys

    if key.required:
        return "**required**"
    if key.default is None or (key.default == () and key.type == keys.STRING_OR_STRINGS):
        return "unset"
    if key.default == () and key.type == keys.STRING_TABLE:
        return md.code("{}")
    return md.code(toml_value(key.default))


def accepted_cell(key: Any, oses: tuple[str, ...]) -> str:
    parts = []
    if key.choices:
        parts.append(" or ".join(md.code(json.dumps(choice)) for choice in key.choices))
    if key.bounds:
        parts.append(f"a whole number from {md.code(key.bounds[0])} to {md.code(key.bounds[1])}")
    if key.accepts:
        parts.append(md.text(key.accepts))
    if key.table == "stack" and key.key == "os":
        parts.append("today: " + ", ".join(md.code(name) for name in oses))
    return "; ".join(parts)


def key_table(table_keys: tuple[Any, ...], oses: tuple[str, ...]) -> str:
    rows = [
        (
            md.code(key.key),
            md.text(key.type),
            default_cell(key),
            accepted_cell(key, oses),
            md.text(key.meaning),
        )
        for key in table_keys
    ]
    return md.table(("key", "type", "default", "accepted", "what it does"), rows)


def example_block(heading: str, table_keys: tuple[Any, ...]) -> str:
    lines = [heading] + [f"{toml_key(key.key)} = {toml_value(key.example)}" for key in table_keys]
    return "```toml\n" + "\n".join(lines) + "\n```\n"


def table_section(table: Any, oses: tuple[str, ...]) -> str:
    from envbuild.spec import keys

    out = [f"## {md.code(table.heading)}", "", md.text(table.meaning), ""]
    if table.free_keys is not None:
        out += ["Its keys are free: " + md.text(table.free_keys) + ".", ""]
        return "\n".join(out)
    own = keys.keys_of(table.name)
    out += [key_table(own, oses)]
    if table.name == "target":
        out += [
            "And every key of [`[stack]`](#stack), with the same type and accepted values; "
            "its default is `[stack]`'s value.",
            "",
        ]
    shown = (
        own + tuple(k for k in keys.keys_of("stack") if k.key == "gpus") if table.name == "target" else own
    )
    out += ["Each key with a value it accepts:", "", example_block(table.heading, shown)]
    if table.name == "audit":
        nested = keys.keys_of("audit.skip")
        out += [
            "### Each `skip` entry",
            "",
            "A table with these keys, one entry per library:",
            "",
            key_table(nested, oses),
        ]
    return "\n".join(out)


def operating_systems() -> tuple[str, ...]:
    """The OS names the bundled matrix has (what [stack] os accepts when resolving)."""
    from envbuild.matrix.load import load_matrix

    return tuple(load_matrix().oses)


def page() -> str:
    from envbuild.spec import keys

    oses = operating_systems()
    intro = (
        "# envbuild.toml\n\n"
        "Every table and key of `envbuild.toml`, with its type, its default and what it accepts, "
        "generated from the spec's own declarations (`envbuild/spec/keys.py`), which the reader "
        "takes its list of keys from. `envbuild init` writes a commented starter; every key is "
        "optional unless marked **required**.\n\n"
        "Every value is checked where it is read. An error names the file, the table, the key, the "
        'value and what is accepted; an unknown key gets a "did you mean"; one run reports every '
        "problem in the file. Every string is refused when it is too long or holds a control character, "
        "invisible formatting or a URL with a user name or password; shell syntax (`&&`, `||`, `;`, a "
        "backtick, `$(`, `${`, a backslash) is refused too, but for a PEP 508 marker's one `;` in "
        "`[packages] pip` and in `[smoke] imports` and `command`, which are checked by their own rules.\n\n"
        "| table | what it holds |\n|---|---|\n"
        + "".join(
            f"| [{md.code(t.heading)}](#{md.anchor(t.heading)}) | {md.text(t.meaning)} |\n"
            for t in keys.TABLES
        )
    )
    return intro + "\n" + "\n".join(table_section(table, oses) for table in keys.TABLES)
