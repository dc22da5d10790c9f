"""Update the table in matrix/README.md of which libraries of the matrix's nvidia-* wheels cuobjdump
reads whole, partly or not at all (envbuild/refresh/cuda_wheels.py says how). Needs https://pypi.org.

    .venv/bin/python bench/cuda_wheels.py --write                       # every family not yet measured
    .venv/bin/python bench/cuda_wheels.py --rows "torch 2.6.0 cu124" --write
    .venv/bin/python bench/cuda_wheels.py --also nvidia-cudnn-cu11==9.1.0.70 --write

A family already in the table, read by the same cuobjdump, is not read again (--again reads it).
With --write the table is rewritten after every wheel, so a run that is stopped keeps what it read.
--budget-s stops starting new wheels after that many seconds. The whole matrix was 154 wheels on
2026-12-02: 27 GB of shared objects read by range requests and listed in 10.5 minutes (2 cores,
about 100 MB/s from PyPI), a third of it the torch 2.6.0 cu124, cu11, cu126 and cu128 sets.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._util import toml  # noqa: E402
from envbuild.audit.kernels import cuobjdump_binary  # noqa: E402
from envbuild.errors import EnvbuildError  # noqa: E402
from envbuild.refresh import cuda_wheels  # noqa: E402
from envbuild.refresh.pypi import newest_matching  # noqa: E402
from envbuild.refresh.upstream import DistFile, Http, pypi_releases  # noqa: E402

README = REPO / "matrix" / "README.md"
REQUIREMENTS = REPO / "matrix" / "requirements.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in matrix/README.md")
    parser.add_argument(
        "--rows",
        action="append",
        default=[],
        metavar="ROW",
        help='only the families of "torch 2.6.0 cu124" (repeatable)',
    )
    parser.add_argument(
        "--also", action="append", default=[], metavar="PACKAGE==VERSION", help="a wheel no row names"
    )
    parser.add_argument(
        "--also-for", default="named by the maintainer", help="who installs the --also wheels"
    )
    parser.add_argument("--again", action="store_true", help="read families the table already has")
    parser.add_argument("--budget-s", type=float, default=None, help="start no wheel after this many seconds")
    parser.add_argument("--pypi-url", default="https://pypi.org")
    parser.add_argument("--readme", default=str(README), help="the table's file (default matrix/README.md)")
    args = parser.parse_args()

    started = time.perf_counter()
    http = Http(timeout=120, retries=3)
    releases: dict[str, dict[str, list[DistFile]]] = {}

    def files_of(package: str) -> dict[str, list[DistFile]]:
        if package not in releases:
            releases[package] = pypi_releases(http, args.pypi_url, package)
        return releases[package]

    builds = toml.loads(REQUIREMENTS.read_text(encoding="utf-8")).get("build", [])
    if args.rows:
        builds = [b for b in builds if f"{b['framework']} {b['version']} {b['variant']}" in args.rows]
    also = []
    for text in args.also:
        package, _, version = text.partition("==")
        if not package or not version:
            parser.error(f"--also {text!r}: expected PACKAGE==VERSION")
        also.append((package, version, args.also_for))
    found, unsettled = cuda_wheels.families(
        builds, lambda package, spec: newest_matching(files_of(package), spec), also
    )
    for line in unsettled:
        print(f"unsettled: {line}")
    binary = cuobjdump_binary()
    version = cuda_wheels.version_number(binary)
    readme = Path(args.readme)
    text = readme.read_text(encoding="utf-8")
    rows = cuda_wheels.table_rows(text)
    everything = cuda_wheels.families(
        toml.loads(REQUIREMENTS.read_text(encoding="utf-8")).get("build", []),
        lambda package, spec: newest_matching(files_of(package), spec),
        also,
    )[0]
    wanted_by = {(f.package, f.version): cuda_wheels.summarize(f.wanted_by) for f in everything}
    day = datetime.date.today().isoformat()
    read_bytes = 0
    todo = [f for f in found if args.again or rows.get((f.package, f.version), None) is None
            or rows[(f.package, f.version)].cuobjdump != version]  # fmt: skip
    print(f"{len(found)} families, {len(todo)} to read with cuobjdump {version}")
    for number, family in enumerate(todo, 1):
        if args.budget_s is not None and time.perf_counter() - started > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(todo) - number + 1} families left")
            break
        wheel = cuda_wheels.pick_wheel(files_of(family.package).get(family.version, []))
        if wheel is None or wheel.sha256 is None:
            print(f"[{number}/{len(todo)}] {family.package} {family.version}: no Linux x86_64 wheel on PyPI")
            continue
        print(f"[{number}/{len(todo)}] {wheel.filename}")
        before, clock = http.bytes_read, time.perf_counter()
        try:
            libraries = cuda_wheels.read_wheel(http, wheel.url, binary, say=print)
        except EnvbuildError as exc:
            print(f"  failed: {exc.message}")
            continue
        read_bytes += http.bytes_read - before
        print(f"  {(http.bytes_read - before) >> 20} MB in {time.perf_counter() - clock:.1f} s")
        key = (family.package, family.version)
        rows[key] = cuda_wheels.WheelRead(
            package=family.package,
            version=family.version,
            filename=wheel.filename,
            sha256=wheel.sha256,
            cuobjdump=version,
            libraries=libraries,
            wanted_by=wanted_by.get(key, cuda_wheels.summarize(family.wanted_by)),
        )
        if args.write:
            text = cuda_wheels.with_table(text, rows.values(), cuda_wheels.intro(rows.values(), day))
            readme.write_text(text, encoding="utf-8")
    if args.write:  # also when nothing was read: the table's text is rewritten as this code writes it
        text = cuda_wheels.with_table(text, rows.values(), cuda_wheels.intro(rows.values(), day))
        readme.write_text(text, encoding="utf-8")
    spent = time.perf_counter() - started
    print(f"read {read_bytes >> 20} MB in {spent:.0f} s; the table has {len(rows)} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
