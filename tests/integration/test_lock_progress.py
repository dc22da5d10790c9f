"""Progress of `envbuild lock` (issue 18, item 4), against the loopback indexes: one line per layer
and target on stderr, each with the time since the start, in the order the work is done; none with
--quiet; and on a terminal (a real pty), a live line rewritten in place by each finished line.
Formats are asserted, never durations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envbuild._util.progress import ERASE
from tests.helpers.badindex import closed_url, no_retries_and_no_proxy
from tests.helpers.locking import run_lock, spec_text
from tests.helpers.terminal import run_on_a_terminal

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
TWO = '\n[[target]]\nname = "train"\ngpus = ["H100"]\n\n[[target]]\nname = "infer"\ngpus = ["L4"]\n'
STAMP = r"\[ *\d+\.\ds\]"


def layer_lines(target: str, last: str) -> list[str]:
    """The three lines of one target, as patterns: its two layers, then the target itself."""
    return [
        rf"{STAMP} target {target}: framework layer \(torch 2\.13\.0\S*, \d+ packages\)",
        rf"{STAMP} target {target}: user layer \(\d+ packages?\)",
        rf"{STAMP} target {target}: {last}",
    ]


@pytest.fixture
def two_targets(tmp_path: Path, indexes) -> Path:
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url) + TWO)
    return tmp_path


def test_lock_prints_one_line_per_layer_and_target_in_order(capsys, two_targets: Path) -> None:
    code, out, err = run_lock(capsys, two_targets, "--base-image", BASE)
    assert code == 0, err
    locked = r"locked \(\d+ packages, base debian:bookworm-slim@sha256:aaaaaaaaaaaa\)"
    expected = layer_lines("train", locked) + layer_lines("infer", locked)
    lines = err.splitlines()
    assert len(lines) == len(expected), err
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert "\r" not in err and "\x1b" not in err  # not a terminal: plain lines for a CI log
    times = [float(re.match(r"\[ *(\d+\.\d)s\]", line).group(1)) for line in lines]
    assert times == sorted(times)  # elapsed since the start, not per step
    assert "[" not in out  # stdout stays the summary
    assert "train: locked" in out and "wrote " in out


def test_quiet_prints_no_progress(capsys, two_targets: Path) -> None:
    code, out, err = run_lock(capsys, two_targets, "--base-image", BASE, "--quiet")
    assert code == 0 and err == ""
    assert "wrote " in out
    code, _, err = run_lock(capsys, two_targets, "-q", "--base-image", BASE)
    assert code == 0 and err == ""


def test_check_shows_the_re_resolution_unless_quiet_json_or_offline(capsys, two_targets: Path) -> None:
    assert run_lock(capsys, two_targets, "--base-image", BASE, "-q")[0] == 0
    code, out, err = run_lock(capsys, two_targets, "--check")
    assert code == 0 and "matches" in out
    expected = layer_lines("train", r"re-resolved \(\d+ packages\)") + layer_lines(
        "infer", r"re-resolved \(\d+ packages\)"
    )
    for line, pattern in zip(err.splitlines(), expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    for flags in (("--quiet",), ("--json",), ("--offline",)):
        code, _, err = run_lock(capsys, two_targets, "--check", *flags)
        assert code == 0 and err == "", flags


def test_a_terminal_gets_a_live_line_rewritten_in_place(tmp_path: Path, indexes) -> None:
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    code, out, text = run_on_a_terminal("lock", "-f", str(tmp_path / "envbuild.toml"), "--base-image", BASE)
    assert code == 0, text
    assert "default: locked" in out
    erase = re.escape(ERASE)
    assert re.search(rf"{erase}{STAMP} resolving target default: framework layer\.\.\.", text)
    assert re.search(
        rf"resolving target default: framework layer\.\.\.{erase}{STAMP} target default: "
        r"framework layer \(torch 2\.13\.0\S*, \d+ packages\)\n",
        text,
    ), text
    assert re.search(rf"user layer\.\.\.{erase}{STAMP} target default: user layer \(", text)
    assert re.search(
        rf"pinning the base image of target default\.\.\.{erase}{STAMP} target default: locked \(", text
    )
    # what the screen shows once done: the three finished lines, no live line left behind
    screen = [line.rsplit(ERASE, 1)[-1] for line in text.split("\n")]
    assert [line for line in screen if line] == [
        line for line in screen if re.fullmatch(rf"{STAMP} target default: .*\)", line)
    ]
    assert len([line for line in screen if line]) == 3 and text.endswith("\n")


def test_on_a_terminal_an_error_replaces_the_live_line(tmp_path: Path, monkeypatch) -> None:
    no_retries_and_no_proxy(monkeypatch)
    url = closed_url()
    (tmp_path / "envbuild.toml").write_text(spec_text("http://127.0.0.1:1/simple", url))
    code, _, text = run_on_a_terminal("lock", "-f", str(tmp_path / "envbuild.toml"), "--base-image", BASE)
    assert code == 1
    assert (
        f"resolving target default: framework layer...{ERASE}error: could not reach the package index {url}"
        in text
    )
