"""The suite under pytest-xdist (issue 31): the engine tests stay on one worker, what a worker could
not run reaches the controller's summary, every test phase is timed once, and a download shared by
the workers is made once (tests/helpers/parallel.py, suite.py, timings.py, notrun.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.collect import collected
from tests.helpers.parallel import (
    APART_GROUP,
    APART_MODULES,
    ENGINE_GROUP,
    ENGINE_TESTS,
    PODMAN_MODULES,
    fill_once,
    scope_of,
)
from tests.helpers.paths import REPO


def test_only_tests_in_tests_engine_use_the_docker_marker() -> None:
    """The engine group is the folder tests/engine/ (the controller sees node ids, not markers), so a
    test marked `docker` anywhere else would share the Engine with the group from another worker."""
    assert collected("docker", "tests/unit", "tests/integration") == []
    assert collected("docker", "tests/engine/test_engine.py")  # the selection does see the marker


@pytest.mark.parametrize(
    ("nodeid", "scope"),
    [
        ("tests/engine/test_build.py::test_build_verify_promote_push", ENGINE_GROUP),
        ("tests/engine/test_build.py::test_a_signal_during_verify_leaves_nothing[SIGINT]", ENGINE_GROUP),
        ("tests/engine/test_slurm_e2e.py::test_slurm_verify_then_promote", APART_GROUP),
        ("tests/engine/test_render_docker.py::test_wheels_build_runs_torch_as_non_root", APART_GROUP),
        ("tests/unit/test_versions.py::test_driver_forms[550-parts0-True-R550]", None),
        ("tests/integration/test_engine_like_name.py::test_x", None),
        ("tests/unit/test_engine.py::test_docker_cli_prefers_the_environment", None),
    ],
)
def test_only_node_ids_under_tests_engine_share_a_unit_of_work(nodeid: str, scope: str | None) -> None:
    assert scope_of(nodeid) == scope


PROBE = "probe: said in a worker, summed up by the controller"


def test_the_apart_modules_run_no_smoke_step_through_the_engine() -> None:
    """The engine group counts the Engine's smoke and inventory containers, so a module beside it
    may start none: no `envbuild build` or Docker verify (a `verify` command line names another
    --runtime), no verify_image or read_inventory, and no Engine-wide container query of its own."""
    for module in sorted(APART_MODULES - PODMAN_MODULES):
        text = (ENGINE_TESTS / module).read_text()
        compact = re.sub(r"\s+", "", text)  # main(\n["build", ... spread over lines is still a build
        assert 'main(["build"' not in compact and '["build","-f"' not in compact, module
        assert "verify_image" not in text and "role=smoke" not in text, module
        assert "inventory" not in text and "attest_image" not in text, module
        for verify in re.findall(r'main\(\["verify"[^\]]*\]', compact):
            assert '"--runtime"' in verify, f"{module}: {verify}"
        for line in text.splitlines():
            if '"verify"' in line and "envbuild" in line:
                assert '"--runtime"' in line, f"{module}: {line.strip()}"


def test_a_podman_module_runs_every_command_on_podman() -> None:
    """A PODMAN_MODULES module may build and smoke (on Podman): a module-scoped autouse fixture sets
    ENVBUILD_ENGINE=podman before any of its fixtures run, and nothing in it asks for Docker."""
    for module in sorted(PODMAN_MODULES):
        text = (ENGINE_TESTS / module).read_text()
        fixture = text.index('@pytest.fixture(scope="module", autouse=True)\ndef on_podman()')
        first = min(text.index("@pytest.fixture"), text.index("\ndef test_"))
        assert fixture == first, f"{module}: on_podman must be its first fixture"
        assert 'patch.setenv("ENVBUILD_ENGINE", "podman")' in text[fixture : fixture + 600], module
        assert '"docker"' not in text and "DOCKER_HOST" not in text, module


SMALL_SUITE = {
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider --import-mode=importlib\n",
    "conftest.py": "from tests.helpers.suite import (  # noqa: F401\n"
    "    pytest_configure, pytest_runtest_logreport, pytest_runtest_makereport,\n"
    "    pytest_terminal_summary, pytest_xdist_make_scheduler,\n)\n",
    "tests/engine/test_e.py": "import os\n\nfrom tests.helpers.notrun import not_run\n\n\n"
    + "".join(f"def test_e{i}():\n    print(os.environ['PYTEST_XDIST_WORKER'])\n" for i in range(8))
    + f"\n\ndef test_says_what_it_did_not_run():\n    not_run({PROBE!r})\n",
    "tests/engine/test_slurm_e2e.py": "".join(f"def test_s{i}():\n    pass\n" for i in range(4)),
    "tests/unit/test_u.py": "".join(f"def test_u{i}():\n    pass\n" for i in range(20)),
}


def test_a_parallel_run_keeps_the_engine_tests_on_one_worker_and_reports_from_every_worker(
    tmp_path: Path,
) -> None:
    for name, text in SMALL_SUITE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    times = tmp_path / "times" / "tests.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENVBUILD_TEST_TIMES": str(times)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-rA"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 workers [33 items]" in done.stdout
    assert (
        "probe: said in a worker, summed up by the controller" in done.stdout.split("not run on this host")[1]
    )
    records = [json.loads(line) for line in times.read_text().splitlines()]
    # three phases a test, each written once: by the controller, never by a worker as well
    assert sorted({r["when"] for r in records}) == ["call", "setup", "teardown"] and len(records) == 33 * 3
    for group in (ENGINE_GROUP, APART_GROUP):
        workers = {r["worker"] for r in records if r["group"] == group}
        assert len(workers) == 1 and workers <= {"gw0", "gw1"}, (group, workers)
    assert {r["group"] for r in records if r["id"].startswith("tests/unit/")} == {None}
    assert all(r["start"] <= r["stop"] for r in records)


def _fill_and_count(root: str, done: multiprocessing.Queue) -> None:
    def fill(directory: Path) -> None:
        with (Path(root) / "calls").open("a") as calls:
            calls.write(f"{os.getpid()}\n")
        (directory / "wheel.whl").write_text("made once")

    done.put(str(fill_once(Path(root), "wheels", fill)))


def test_a_shared_directory_is_filled_once_whichever_process_asks_first(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    done = context.Queue()
    workers = [context.Process(target=_fill_and_count, args=(str(tmp_path), done)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert {done.get(timeout=10) for _ in workers} == {str(tmp_path / "wheels")}
    assert len((tmp_path / "calls").read_text().split()) == 1
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == ["wheel.whl"]  # no marker inside it


def test_a_fill_that_fails_leaves_nothing_and_the_next_one_fills(tmp_path: Path) -> None:
    def broken(directory: Path) -> None:
        (directory / "half.whl").write_text("half")
        raise subprocess.CalledProcessError(1, ["pip", "download"])

    with pytest.raises(subprocess.CalledProcessError):
        fill_once(tmp_path, "wheels", broken)
    assert not (tmp_path / "wheels").exists()
    made = fill_once(tmp_path, "wheels", lambda directory: (directory / "whole.whl").write_text("x"))
    assert [p.name for p in made.iterdir()] == ["whole.whl"]
