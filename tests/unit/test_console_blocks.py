"""The reader of the docs' console blocks (tests/helpers/console.py), which the getting-started test
trusts to hold docs/getting-started.md to what its commands print: what it takes as a command, as
output and as an exit status, and that its comparison fails on a wrong line rather than passing
anything that looks close."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import console
from tests.helpers.paths import REPO

PAGE = """# A page

Some prose, and a block no test runs:

```sh
envbuild render
```

```console
$ echo one
one
$ printf 'a\\nb\\n' \\
    | tr a-z A-Z
A
B
```

```console
$ cat > envbuild.toml <<'EOF'
[stack]
$ not a command: inside the heredoc
EOF
$ false  # exit 1
```
"""


def test_commands_are_read_in_page_order_with_their_output_heredocs_and_exit_status() -> None:
    found = console.commands(PAGE)
    assert [c.text for c in found] == [
        "echo one",
        "printf 'a\\nb\\n' \\\n    | tr a-z A-Z",
        "cat > envbuild.toml <<'EOF'\n[stack]\n$ not a command: inside the heredoc\nEOF",
        "false  # exit 1",
    ]
    assert [c.output for c in found] == [("one",), ("A", "B"), (), ()]
    assert [c.exit_code for c in found] == [0, 0, 0, 1]
    assert [c.line for c in found] == [10, 12, 19, 23]


def test_a_heredoc_left_open_and_output_before_a_command_are_refused() -> None:
    with pytest.raises(ValueError, match="heredoc EOF is never closed"):
        console.commands("```console\n$ cat > x <<EOF\nno end\n```\n")
    with pytest.raises(ValueError, match="output before any"):
        console.commands("```console\nstray\n$ true\n```\n")


def test_a_wrong_output_line_fails_and_is_named() -> None:
    assert console.mismatch(("one", "two"), "one\ntwo\n") is None
    problem = console.mismatch(("one", "two"), "one\nthree\n")
    assert problem is not None and "'two'" in problem and "three" in problem


def test_a_missing_line_and_output_past_the_page_fail() -> None:
    assert console.mismatch(("one", "two"), "one\n") is not None
    problem = console.mismatch(("one",), "one\nsurplus\n")
    assert problem is not None and "surplus" in problem


def test_three_dots_stand_for_any_number_of_lines_none_included() -> None:
    expected = ("start", "...", "end")
    assert console.mismatch(expected, "start\nend\n") is None
    assert console.mismatch(expected, "start\nx\ny\nz\nend\n") is None
    assert console.mismatch(expected, "start\nx\n") is not None  # `...` does not excuse a missing end
    # the lines after `...` still have to come in order: a later match is found, not a first guess
    assert console.mismatch(("...", "b", "c"), "b\nx\nb\nc\n") is None


def test_an_ellipsis_inside_a_line_stands_for_any_text_of_that_line_only() -> None:
    expected = ("built sha256:… in …s",)
    assert console.mismatch(expected, "built sha256:4266c5b28ab0 in 2.9s\n") is None
    assert console.mismatch(expected, "built sha256:4266c5b28ab0 in 2.9 min\n") is not None
    assert console.mismatch(("a…",), "ab\nc\n") is not None  # never spans lines
    assert console.mismatch(("x.y",), "xzy\n") is not None  # the rest is literal, not a pattern


def test_trailing_spaces_and_trailing_blank_lines_do_not_count() -> None:
    assert console.mismatch(("a table  ",), "a table\n\n\n") is None


def test_run_holds_a_command_to_its_output_and_exit_status(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    ok, failing, silent_failure = console.commands(
        "```console\n$ printf 'x\\ny\\n'\nx\ny\n$ exit 3  # exit 3\n$ false\n```\n"
    )
    assert console.run(ok, tmp_path, env) is None
    assert console.run(failing, tmp_path, env) is None
    problem = console.run(silent_failure, tmp_path, env)
    assert problem is not None and "exited 1, the page says 0" in problem
    wrong = ok.replace(output=("x", "z"))
    problem = console.run(wrong, tmp_path, env)
    assert problem is not None and "'z'" in problem


def test_the_getting_started_page_has_every_typed_command_in_a_console_block() -> None:
    """The engine test runs the console blocks; a `$ ` line in any other block would be a command
    the page shows as typed that nothing runs."""
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert console.blocks_with_untested_prompts(text) == []
    texts = [command.text for command in console.commands(text)]
    assert any(t.startswith("envbuild build") for t in texts) and any("<<'EOF'" in t for t in texts)
