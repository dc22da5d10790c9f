"""A stand-in `nvidia-smi` on PATH that answers from real captured output (tests/fixtures/nvidia-smi,
SOURCES.md says where each came from), so doctor's real subprocess path runs; and the doctor call.

The stand-in can also answer with exact bytes (invalid UTF-8, nothing at all) and be slow, which is
how a wedged driver looks to the doctor."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.host.nvsmi import QUERY_FIELDS
from tests.helpers.paths import FIXTURES

CAPTURES = FIXTURES / "nvidia-smi"
CU124_ARCH = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"

FAKE = """#!{python}
# A stand-in nvidia-smi that answers from captured output in $FAKE_SMI_DIR.
import os, sys, time
d = os.environ["FAKE_SMI_DIR"]
args = sys.argv[1:]
if os.path.exists(os.path.join(d, "sleep.txt")):
    time.sleep(float(open(os.path.join(d, "sleep.txt")).read()))
def emit(name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        return False
    sys.stdout.buffer.write(open(path, "rb").read())  # bytes as captured, valid UTF-8 or not
    return True
if not args:
    sys.exit(0 if emit("banner.txt") else 9)
if args[0].startswith("--query-gpu="):
    fields = args[0].split("=", 1)[1]
    wanted = os.path.join(d, "fields.txt")
    if os.path.exists(wanted) and open(wanted).read().strip() == fields:
        emit("query.csv"); sys.exit(0)
    print('Field "%s" is not a valid field to query.' % fields.split(",")[-1]); sys.exit(2)
if args[0].startswith("--query-compute-apps="):
    emit("apps.csv"); sys.exit(0)
if args[0] == "-q":
    emit("q.txt"); sys.exit(0)
sys.exit(3)
"""


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def install_fake_smi(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Put the fake nvidia-smi first on PATH; returns a function that loads a capture into it."""
    bin_dir = directory / "bin"
    data = directory / "smi"
    bin_dir.mkdir()
    data.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_DIR", str(data))

    def load(
        banner: str | bytes, query_csv: str | None = None, q: str | None = None, *, sleep_s: float = 0
    ) -> None:
        """banner: a capture's file name, or the exact bytes to print; sleep_s: delay every answer."""
        (data / "banner.txt").write_bytes(
            banner if isinstance(banner, bytes) else (CAPTURES / banner).read_bytes()
        )
        if query_csv is not None:
            (data / "query.csv").write_text(query_csv)
            (data / "fields.txt").write_text(",".join(QUERY_FIELDS))
        if q is not None:
            (data / "q.txt").write_text(q)
        if sleep_s:
            (data / "sleep.txt").write_text(str(sleep_s))

    return load
