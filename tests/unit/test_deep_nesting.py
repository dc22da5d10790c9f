"""Issue 33: a document nested deeper than Python's parsers recurse is bad input, never a traceback.
json.loads and tomllib.loads raise RecursionError on `[[[[...`, which every reader's `except
ValueError` missed: a hostile lock, spec, matrix file, smoke report or registry answer ended envbuild
with an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild._util.jsontext import parse_json
from envbuild.cli.app import main

DEEP = 200_000


def test_json_too_deep_is_a_decode_error_every_reader_handles() -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json("[" * DEEP + "]" * DEEP)
    assert isinstance(raised.value, ValueError) and "nested deeper" in str(raised.value)
    assert parse_json('{"a": [[1]]}') == {"a": [[1]]}


def test_toml_too_deep_is_a_decode_error() -> None:
    with pytest.raises(toml.TOMLDecodeError, match="nested deeper"):
        toml.loads("a = " + "[" * DEEP + "]" * DEEP)
    assert toml.loads("a = [[1]]") == {"a": [[1]]}


def test_a_deeply_nested_spec_is_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(
        '[stack]\ndriver = "550"\nframework = "torch"\n\n[packages]\npip = ' + "[" * DEEP + "]" * DEEP
    )
    code = main(["render", "-f", str(spec), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and str(spec) in err and "Traceback" not in err


def test_a_deeply_nested_smoke_report_is_refused_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --from-log judges a cluster's output: a log line that opens a hundred thousand arrays."""
    log = tmp_path / "job.log"
    log.write_text("[" * DEEP + "]" * DEEP + "\n")
    code = main(["verify", "envbuild-test/none:x", "--from-log", str(log), "--smoke-device", "cpu"])
    err = capsys.readouterr().err
    assert code in (1, 2) and "Traceback" not in err and "internal error" not in err
