"""bench/ci_time.py (issue 31): the phase table .ci/run prints at its end, the slowest tests, and the
two checks that fail CI: fewer tests than tests/expected_count.txt, and engine tests on two workers.
Run as .ci/run runs it, on files in the formats .ci/run and tests/helpers/timings.py write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO

SCRIPT = REPO / "bench" / "ci_time.py"
T0 = 1_796_000_000.0


def phases(directory: Path, marks: list[tuple[str, float]]) -> None:
    (directory / "phases.tsv").write_text("".join(f"{name}\t{T0 + at}\n" for name, at in marks))


def timings(directory: Path, tests: list[tuple[str, str, float, float]]) -> None:
    """tests: (node id, worker, start, seconds of its call); setup and teardown take 0.5 s each. The
    group is what tests/helpers/parallel.py gives: engine-apart for the Slurm module, engine for the
    rest of tests/engine."""
    lines = []
    for node_id, worker, start, seconds in tests:
        group = None
        if node_id.startswith("tests/engine/"):
            group = "engine-apart" if "test_slurm_e2e" in node_id else "engine"
        spans = [("setup", start, start + 0.5), ("call", start + 0.5, start + 0.5 + seconds)]
        spans.append(("teardown", start + 0.5 + seconds, start + 1 + seconds))
        for when, begin, end in spans:
            record = {"id": node_id, "when": when, "outcome": "passed", "worker": worker, "group": group}
            lines.append(json.dumps({**record, "start": T0 + begin, "stop": T0 + end}))
    (directory / "tests.jsonl").write_text("\n".join(lines) + "\n")


def ci_time(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(directory), *args], capture_output=True, text=True, check=False
    )


SUITE = [
    ("tests/engine/test_build.py::test_push@engine", "gw0", 100, 60),
    ("tests/engine/test_build.py::test_api@engine", "gw0", 161, 30),
    ("tests/unit/test_a.py::test_one[user@host]", "gw1", 100, 2),  # an @ inside a parameter id
    ("tests/unit/test_a.py::test_one[user@other]", "gw1", 103, 1),
    ("tests/integration/test_lock.py::test_lock", "gw1", 105, 9),
]


def test_the_phase_table_splits_the_tests_by_folder_and_lists_the_slowest(tmp_path: Path) -> None:
    phases(tmp_path, [("setup", 0), ("test", 95), ("bench", 200), ("end", 262)])
    timings(tmp_path, SUITE)
    done = ci_time(tmp_path, "--slowest", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["CI time by phase", "  setup          1:35"]
    assert lines[2] == "  test           1:45"
    assert lines[3].split() == [
        "unit",
        "2",
        "tests",
        "0:05",
        "summed",
        "0:05",
        "first",
        "to",
        "last",
        "on",
        "gw1",
    ]
    assert lines[5].split()[:5] == ["engine", "2", "tests", "1:32", "summed"]
    assert lines[5].split()[5] == "1:32" and lines[5].endswith("on gw0")
    assert lines[6:8] == ["  bench          1:02", "  total          4:22"]
    assert "slowest 2 tests (setup + call + teardown)" in done.stdout
    assert "     61.0 s  tests/engine/test_build.py::test_push" in lines
    assert lines[-1] == "5 tests reported, 0 failed"


def test_fewer_tests_than_expected_fail(tmp_path: Path) -> None:
    timings(tmp_path, SUITE)
    expected = tmp_path / "expected_count.txt"
    expected.write_text("5\n")
    assert ci_time(tmp_path, "--expect", str(expected)).returncode == 0
    expected.write_text("6\n")
    done = ci_time(tmp_path, "--expect", str(expected))
    assert done.returncode == 1
    assert "fewer tests than" in done.stderr and "5 < 6" in done.stderr


def test_a_group_on_two_workers_fails_and_two_groups_on_two_workers_do_not(tmp_path: Path) -> None:
    apart = ("tests/engine/test_slurm_e2e.py::test_slurm", "gw1", 110, 70)
    timings(tmp_path, [*SUITE, apart])
    assert ci_time(tmp_path).returncode == 0, ci_time(tmp_path).stderr
    timings(tmp_path, [*SUITE, apart, ("tests/engine/test_ci_flow.py::test_flow", "gw1", 120, 5)])
    done = ci_time(tmp_path)
    assert done.returncode == 1
    assert "the engine group's tests ran on 2 workers (gw0, gw1)" in done.stderr
