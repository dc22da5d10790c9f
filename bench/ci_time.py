"""Where CI's minutes go: the time of each phase of `.ci/run` and the slowest tests.

.ci/run writes two files into one directory (default build/ci-time):

- `phases.tsv`: one line per phase as it starts, `NAME<TAB>EPOCH-SECONDS`, and `end` last;
- `tests.jsonl`: one line per test phase (setup, call, teardown) from tests/helpers/timings.py, with
  its node id, outcome, xdist worker and start and stop times.

It prints each phase's wall time, and inside the test phase the unit, integration and engine tests
apart: how many, their summed time, the span from the first one's start to the last one's stop and
the workers that ran them (they run side by side, so the spans overlap and their sum is not the
phase's wall time). Then the slowest tests, setup and teardown included.

It fails (exit 1) when the tests of one group (the line's `group`: the engine tests, which share one
Docker Engine, tests/helpers/parallel.py) ran on more than one xdist worker: a scheduler that stopped
grouping them would otherwise go unseen until a test flaked. `--expect FILE` also fails it when fewer tests
reported than the number FILE holds (tests/expected_count.txt), so a change in collection cannot
drop tests unnoticed.

Run: `.venv/bin/python bench/ci_time.py [DIR] [--slowest N] [--expect FILE]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIRECTORY = REPO / "build" / "ci-time"
KINDS = ("unit", "integration", "engine")  # the folders under tests/, in the order they are printed
MAX_LINES = 100_000  # a suite of 2,000 tests writes about 6,000


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60:d}:{whole % 60:02d}"


def read_phases(path: Path) -> list[tuple[str, float]]:
    """(name, seconds) per phase, from the start marks: each phase ends where the next one starts."""
    marks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, stamp = line.partition("\t")
        marks.append((name, float(stamp)))
    return [(name, marks[i + 1][1] - start) for i, (name, start) in enumerate(marks[:-1])]


def read_tests(path: Path) -> dict[str, list[dict]]:
    """Node id (without xdist's @group suffix) -> its phases' records."""
    tests: dict[str, list[dict]] = defaultdict(list)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number >= MAX_LINES:
                raise SystemExit(f"{path}: more than {MAX_LINES} lines; is it a timings file?")
            record = json.loads(line)
            tests[without_group(record["id"])].append(record)
    return tests


def without_group(node_id: str) -> str:
    """The node id without an xdist `@group` suffix: an `@` after the last `]` (xdist's own rule; a
    parameter id such as `[user@host]` keeps its `@`)."""
    at = node_id.rfind("@")
    return node_id[:at] if at > node_id.rfind("]") else node_id


def kind(node_id: str) -> str:
    parts = node_id.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def seconds(records: list[dict]) -> float:
    return sum(record["stop"] - record["start"] for record in records)


def test_table(tests: dict[str, list[dict]]) -> list[str]:
    by_kind: dict[str, list[list[dict]]] = defaultdict(list)
    for node_id, records in tests.items():
        by_kind[kind(node_id)].append(records)
    rows = []
    for name in [*KINDS, *sorted(set(by_kind) - set(KINDS))]:
        groups = by_kind.get(name)
        if not groups:
            continue
        records = [record for group in groups for record in group]
        span = max(r["stop"] for r in records) - min(r["start"] for r in records)
        workers = ",".join(sorted({r["worker"] for r in records}))
        summed = sum(seconds(group) for group in groups)
        rows.append(
            f"  {name:<12} {len(groups):>5} tests  {minutes(summed):>6} summed"
            f"  {minutes(span):>6} first to last  on {workers}"
        )
    return rows


def group_workers(tests: dict[str, list[dict]]) -> dict[str, set[str]]:
    """Each group's workers."""
    workers: dict[str, set[str]] = defaultdict(set)
    for records in tests.values():
        for record in records:
            if record.get("group"):
                workers[record["group"]].add(record["worker"])
    return workers


def failed(tests: dict[str, list[dict]]) -> int:
    return sum(any(r["outcome"] == "failed" for r in records) for records in tests.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DIRECTORY)
    parser.add_argument("--slowest", type=int, default=25, metavar="N")
    parser.add_argument("--expect", type=Path, metavar="FILE", help="the least number of tests")
    args = parser.parse_args(argv)
    phases_file, tests_file = args.directory / "phases.tsv", args.directory / "tests.jsonl"
    phases = read_phases(phases_file) if phases_file.exists() else []
    tests = read_tests(tests_file) if tests_file.exists() else {}

    print("CI time by phase")
    for name, wall in phases:
        print(f"  {name:<12} {minutes(wall):>6}")
        if name == "test" and tests:
            print("\n".join("  " + row for row in test_table(tests)))
    if phases:
        print(f"  {'total':<12} {minutes(sum(wall for _, wall in phases)):>6}")
    elif tests:
        print("\n".join(test_table(tests)))
    slowest = sorted(tests.items(), key=lambda item: -seconds(item[1]))[: args.slowest]
    if slowest:
        print(f"\nslowest {len(slowest)} tests (setup + call + teardown)")
        for node_id, records in slowest:
            print(f"  {seconds(records):7.1f} s  {node_id}")
    print(f"\n{len(tests)} tests reported, {failed(tests)} failed")

    status = 0
    for group, workers in sorted(group_workers(tests).items()):
        if len(workers) > 1:
            print(
                f"the {group} group's tests ran on {len(workers)} workers ({', '.join(sorted(workers))}): "
                "a group must run on one (tests/helpers/parallel.py); is `--dist loadgroup` given?",
                file=sys.stderr,
            )
            status = 1
    if args.expect is not None:
        expected = int(args.expect.read_text(encoding="utf-8").strip())
        if len(tests) < expected:
            print(
                f"fewer tests than {args.expect} expects: {len(tests)} < {expected}; "
                "a test was dropped from collection (or, if it was removed on purpose, lower the number)",
                file=sys.stderr,
            )
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
