"""The generated reference pages (docsgen, issue 39) name everything the code has: every command and
flag, every envbuild.toml key, every exit code, every environment variable, every record and report
field. What each page must name is enumerated here from the code itself (the parser's actions, the
reader's key lists, the schema, a real rendered stack.json), not from the generators, so a generator
that drops an item fails."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docsgen import cli_reference, environment, exit_codes, formats, spec_reference
from envbuild import errors
from envbuild._util.signals import SIGNALS, Interrupted
from envbuild.attest.record import BuildRecord
from envbuild.cli import envvars
from envbuild.cli.parser import build_parser
from envbuild.lockfile import read as lock_reader
from envbuild.preflight import STOP_STATUS
from envbuild.smoke.report import load_schema
from envbuild.spec import keys
from envbuild.spec.model import TABLE_KEYS
from envbuild.vendor import manifest
from tests.helpers.paths import REPO


def sections(page: str, level: str) -> dict[str, str]:
    """Heading text -> the text under it, up to the next heading of `level` (e.g. "## ") or above."""
    found: dict[str, str] = {}
    title = None
    for line in page.splitlines():
        if re.match(rf"#{{1,{len(level.strip())}}} ", line):
            title = line.lstrip("#").strip()
            found[title] = ""
        elif title is not None:
            found[title] += line + "\n"
    return found


def code(text: str) -> str:
    return f"`{text}`"


# --- commands -----------------------------------------------------------------------------------

PARSERS = {path: parser for path, parser in build_parser(every=True)[1].items()}
CLI_PAGE = cli_reference.page()
CLI_SECTIONS = sections(CLI_PAGE, "#### ")


def test_the_whole_tree_is_built_and_resolve_still_builds_only_its_own() -> None:
    """The page needs every command's arguments; `envbuild resolve` keeps paying for its own only."""
    assert {"ci github", "ci gitlab", "ci k8s", "ci slurm", "matrix refresh", "completion"} <= set(PARSERS)
    _, only_resolve = build_parser(["resolve", "--driver", "550"])
    filled = [path for path, parser in only_resolve.items() if path and len(parser._actions) > 1]
    assert filled == ["resolve"]


@pytest.mark.parametrize("path", sorted(p for p in PARSERS if p))
def test_every_command_has_its_section_with_its_usage_and_every_flag(path: str) -> None:
    section = CLI_SECTIONS.get(f"envbuild {path}")
    assert section is not None, f"no section for `envbuild {path}`"
    parser = PARSERS[path]
    assert f"usage: envbuild {path}" in section
    if parser.description:
        assert parser.description.split()[0] in section
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = action.option_strings or [action.metavar or action.dest]
        for name in names:
            assert code(str(name)) in section, f"`envbuild {path}` lacks {name}"
        for choice in action.choices or ():
            assert code(str(choice)) in section, f"`envbuild {path}` {names[0]} lacks the choice {choice}"


def test_every_subcommand_of_a_group_is_listed_in_its_section() -> None:
    for path, parser in PARSERS.items():
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if action is None or not path:
            continue
        for name in action.choices:
            assert f"(#envbuild-{path.replace(' ', '-')}-{name})" in CLI_SECTIONS[f"envbuild {path}"]


def test_the_top_level_flags_are_there() -> None:
    assert code("--version") in CLI_SECTIONS["envbuild"]


def test_a_flag_dropped_from_the_page_fails_the_check() -> None:
    """The section check above can fail: the page without one flag's row lacks it."""
    section = CLI_SECTIONS["envbuild ci slurm"]
    without = "\n".join(line for line in section.splitlines() if "`--partition`" not in line)
    assert code("--partition") in section and code("--partition") not in without


# --- envbuild.toml ------------------------------------------------------------------------------

SPEC_PAGE = spec_reference.page()
SPEC_SECTIONS = sections(SPEC_PAGE, "### ")


def key_rows(section: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", section, re.MULTILINE)}


@pytest.mark.parametrize("table", sorted(TABLE_KEYS))
def test_every_key_the_reader_accepts_has_its_row(table: str) -> None:
    heading = f"`[[{table}]]`" if table == "target" else f"`[{table}]`"
    rows = key_rows(SPEC_SECTIONS[heading])
    own = TABLE_KEYS[table] if table != "target" else ("name",)  # a target's others are [stack]'s
    assert sorted(set(own) - set(rows)) == []
    for name in own:
        declared = next(k for k in keys.KEYS if k.table == table and k.key == name)
        assert ("**required**" in rows[name]) == declared.required
        for choice in declared.choices or ():
            assert f'`"{choice}"`' in rows[name]
        if declared.bounds:
            assert all(code(str(bound)) in rows[name] for bound in declared.bounds)


def test_the_audit_skip_entries_and_mirrors_are_described() -> None:
    skip_rows = key_rows(SPEC_SECTIONS["Each `skip` entry"])
    assert {"library", "reason"} <= set(skip_rows)
    assert "prefix" in SPEC_SECTIONS["`[mirrors]`"]


def test_the_os_list_is_the_matrix_s() -> None:
    from envbuild.matrix.load import load_matrix

    row = key_rows(SPEC_SECTIONS["`[stack]`"])["os"]
    assert all(code(name) in row for name in load_matrix().oses)


# --- exit codes ---------------------------------------------------------------------------------

EXIT_PAGE = exit_codes.page()


def exit_rows() -> dict[int, str]:
    return {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| `(\d+)` \|.*$", EXIT_PAGE, re.MULTILINE)}


def test_every_exit_code_has_its_row() -> None:
    rows = exit_rows()
    constants = {v for k, v in vars(errors).items() if k.startswith("EXIT_") and isinstance(v, int)}
    raised = {
        cls.exit_code for cls in vars(errors).values() if isinstance(cls, type) and hasattr(cls, "exit_code")
    }
    signalled = {Interrupted(signum).exit_code for signum in SIGNALS}
    expected = (constants - {errors.EXIT_SIGNAL_BASE}) | raised | signalled | {STOP_STATUS}
    assert sorted(expected - set(rows)) == []
    assert sorted(set(rows) - expected) == []


def test_the_exit_constants_are_the_ones_the_guard_and_the_signals_use() -> None:
    assert STOP_STATUS == errors.EXIT_PREFLIGHT_STOP
    assert all(Interrupted(s).exit_code == errors.EXIT_SIGNAL_BASE + s for s in SIGNALS)
    assert set(errors.EXIT_MEANINGS) == {
        v for k, v in vars(errors).items() if k.startswith("EXIT_") and isinstance(v, int)
    }


# --- environment variables ----------------------------------------------------------------------


def test_every_variable_is_on_the_page_and_the_tests_own_apart() -> None:
    page = environment.page()
    tool, tests = page.split("## The tests' own", 1)
    assert [v.name for v in envvars.VARIABLES if f"| {code(v.name)} |" not in tool] == []
    assert [v.name for v in envvars.TEST_VARIABLES if f"| {code(v.name)} |" not in tests] == []
    assert "ENVBUILD_TEST_" not in tool


# --- records and reports ------------------------------------------------------------------------

FORMATS_PAGE = formats.page()
FORMAT_SECTIONS = sections(FORMATS_PAGE, "## ")


def section_named(start: str) -> str:
    return next(text for title, text in FORMAT_SECTIONS.items() if title.startswith(start))


def listed_fields(section: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\| (?:[^|]+\| )?`([^`]+)` \|", section, re.MULTILINE)}


def test_every_record_field_is_on_the_page() -> None:
    fields = set(BuildRecord.__slots__) - {"keys", "extra"}
    assert len(fields) > 25
    assert sorted(fields - listed_fields(section_named("`record.json`"))) == []


def schema_paths(schema: dict, prefix: str = "") -> set[str]:
    paths = set()
    for name, sub in schema.get("properties", {}).items():
        paths.add(prefix + name)
        paths |= schema_paths(sub, f"{prefix}{name}.")
        if isinstance(sub.get("items"), dict):
            paths |= schema_paths(sub["items"], f"{prefix}{name}[].")
    return paths


def test_every_smoke_report_field_of_the_schema_is_on_the_page() -> None:
    paths = schema_paths(load_schema())
    assert {"passed", "devices[].name", "memory.num_ooms", "preflight.verdict"} <= paths
    assert sorted(paths - listed_fields(section_named("The smoke report"))) == []


def test_every_field_of_a_rendered_stack_json_is_on_the_page(tmp_path: Path) -> None:
    spec = REPO / "examples" / "torch-wheels" / "envbuild.toml"
    done = subprocess.run(
        [sys.executable, "-m", "envbuild", "render", "-f", str(spec), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "default" / "stack.json").read_text())
    paths = set(document) | {f"cuda_libraries.{key}" for key in document["cuda_libraries"]}
    assert sorted(paths - listed_fields(section_named("`stack.json`"))) == []


def test_every_key_the_lock_reader_accepts_is_on_the_page() -> None:
    section = section_named("`envbuild.lock`")
    tables = {
        "top level": lock_reader.TOP_KEYS,
        "`[[mirror]]`": lock_reader.MIRROR_KEYS,
        "`[[target]]`": lock_reader.TARGET_KEYS,
        "`[target.stack]`": tuple(k.replace("_", "-") for k in lock_reader.STACK_KEYS),
        "`[[target.package]]`": lock_reader.PACKAGE_KEYS,
        "`[[target.conda]]`": lock_reader.CONDA_KEYS,
    }
    missing = [
        f"{table} {key}"
        for table, names in tables.items()
        for key in names
        if f"| {table} | `{key}` |" not in section
    ]
    assert missing == []


def test_every_field_of_bundle_json_is_on_the_page() -> None:
    sample = manifest.Manifest(
        envbuild="1",
        lock_digest="sha256:" + "1" * 64,
        targets=(manifest.BundleTarget(name="t", platform="linux/arm64", base_image="b"),),
        files=(manifest.BundleFile(path="wheels/a.whl", kind="wheel", sha256="1" * 64, size=2, source="s"),),
    )
    document = json.loads(manifest.dumps(sample))
    paths = set(document) | {
        f"{array}[].{key}" for array in ("targets", "files") for key in document[array][0]
    }
    assert sorted(paths - listed_fields(section_named("`bundle.json`"))) == []


def test_a_field_a_writer_adds_without_a_meaning_stops_the_build() -> None:
    found = formats.field_paths({"framework": "torch", "new_field": 1}, frozenset())
    with pytest.raises(formats.DriftError, match="new_field"):
        formats.described_rows("stack.json", found, {"framework": ("string", "x")})
    with pytest.raises(formats.DriftError, match="gone"):
        formats.described_rows(
            "stack.json", {"framework": {"string"}}, {"framework": ("string", "x"), "gone": ("string", "y")}
        )


# --- the built site -----------------------------------------------------------------------------

SAMPLES = {
    "cli": ('id="envbuild-ci-slurm"', "<code>--partition</code>"),
    "envbuild-toml": ("<code>python-source</code>", '<code>"deadsnakes"</code>'),
    "exit-codes": ("<code>EXIT_NO_STACK</code>", "<code>78</code>"),
    "environment": ("<code>ENVBUILD_MATRIX</code>", "<code>ENVBUILD_TEST_REGISTRY</code>"),
    "formats": ("<code>report_digest</code>", "<code>devices[].name</code>"),
}


@pytest.mark.parametrize("page", sorted(SAMPLES))
def test_the_reference_page_is_in_the_built_site(page: str, built_site: Path) -> None:
    html = (built_site / "reference" / page / "index.html").read_text()
    assert "not written yet" not in html
    for sample in SAMPLES[page]:
        assert sample in html, f"site/reference/{page}/ lacks {sample}"
