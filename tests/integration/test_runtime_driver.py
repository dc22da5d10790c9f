"""runtime.driver's contract, with a runtime of real processes (tests/helpers/runtimes.py) and a
real registry on loopback: whatever a runtime's steps do, the scratch directory goes away on a pass,
a failure, a fetch failure and a timeout; a timeout kills the step's whole process group; cleanup
steps run once a fetch started and not before; smoke.env carries the run's variables; the report
names the runtime; the image id is the registry's config digest and the USER becomes "uid:gid"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.errors import NotFound, VerifyError
from envbuild.runtime.base import SMOKE_ENV_FILE
from envbuild.runtime.driver import WORKDIR_ENV, identify, verify_with
from tests.helpers.runtimes import ConfigRegistry, ScriptedRuntime, entries, gone_within, print_report, sh

# Env as the registry serves it, untrusted: a number, an entry with no name and one with no "=" are no
# environment entries and are dropped; the rest keep their order
ENV = ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", 7, "=nameless", "NOEQUALS", "EMPTY="]
CONFIG = {"architecture": "amd64", "os": "linux", "config": {"User": "10001:10002", "Env": ENV}}
KEPT_ENV = ("PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", "EMPTY=")


@pytest.fixture(scope="module")
def registry() -> Iterator[ConfigRegistry]:
    with ConfigRegistry(CONFIG) as server:
        yield server


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$ENVBUILD_RUNTIME_DIR: every run's scratch directory is made here, so "empty afterwards" is
    "nothing left behind"."""
    directory = tmp_path / "runtime-dir"
    directory.mkdir()
    monkeypatch.setenv(WORKDIR_ENV, str(directory))
    return directory


def recording(tmp_path: Path, execute, fetch_script: str = "") -> ScriptedRuntime:
    """A runtime whose fetch unpacks a file into the scratch directory and copies smoke.env out,
    and whose cleanup appends to tmp_path/cleanup.log."""
    unpack = 'mkdir "$1/unpacked" && echo layer > "$1/unpacked/file" && cp "$1/$2" "$3"'
    return ScriptedRuntime(
        fetch=lambda run: (
            [sh(unpack, run.workdir, SMOKE_ENV_FILE, str(tmp_path / "seen.env"))]
            + ([sh(fetch_script)] if fetch_script else [])
        ),
        execute=execute,
        cleanup=lambda run: [sh('echo "cleaned $1" >> "$2"', run.workdir, str(tmp_path / "cleanup.log"))],
    )


def test_a_passing_run_is_judged_named_and_leaves_nothing(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    runtime = recording(tmp_path, lambda run: print_report("torch-cpu-passed.json"))
    verification = verify_with(runtime, registry.ref, device="cpu", env={"ENVBUILD_SMOKE_LR": "0.1"})
    assert verification.passed
    assert verification.runtime == "scripted"
    assert verification.report["runtime"] == "scripted"
    assert verification.report["gates"]  # judged with the gates applied
    assert verification.image_id == registry.config_digest
    assert verification.platform == "linux/amd64"
    # a CPU smoke step runs without a GPU on purpose: the image's preflight guard only warns there
    assert (tmp_path / "seen.env").read_text() == "ENVBUILD_PREFLIGHT=warn\nENVBUILD_SMOKE_LR=0.1\n"
    assert (tmp_path / "cleanup.log").read_text().startswith(f"cleaned {scratch}/envbuild-verify-")
    assert entries(scratch) == []


def test_a_failing_smoke_step_is_a_failed_verification_and_leaves_nothing(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    runtime = recording(tmp_path, lambda run: print_report("torch-cpu-lr0-failed.json", exit_code=1))
    verification = verify_with(runtime, registry.ref, device="cpu")
    assert not verification.passed
    assert verification.exit_code == 1
    assert verification.report["failed"]
    assert (tmp_path / "seen.env").read_text() == "ENVBUILD_PREFLIGHT=warn\n"
    assert (tmp_path / "cleanup.log").exists()
    assert entries(scratch) == []


def test_a_fetch_failure_names_the_step_and_its_stderr_and_still_cleans_up(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    refused = 'echo "pulling layers" ; echo "manifest unknown: sha256:abc" >&2; exit 7'
    runtime = recording(tmp_path, lambda run: print_report("torch-cpu-passed.json"), fetch_script=refused)
    with pytest.raises(VerifyError) as caught:
        verify_with(runtime, registry.ref, device="cpu")
    assert caught.value.exit_code == 1
    assert "scripted could not fetch step 2 (exit 7): manifest unknown: sha256:abc" in str(caught.value)
    assert "run `sh -c" in caught.value.fix
    assert (tmp_path / "cleanup.log").exists()  # the first step had unpacked something
    assert entries(scratch) == []


def test_no_cleanup_and_no_scratch_directory_before_a_fetch_started(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    runtime = recording(tmp_path, lambda run: print_report("torch-cpu-passed.json"))
    missing = registry.ref.rsplit("@", 1)[0] + "@sha256:" + "0" * 64
    with pytest.raises(NotFound, match=r"not found in .*/x/y"):  # identify() fails before any fetch
        verify_with(runtime, missing, device="cpu")
    assert not (tmp_path / "cleanup.log").exists()
    assert not (tmp_path / "seen.env").exists()
    assert entries(scratch) == []


def test_a_timeout_kills_the_whole_process_group_and_leaves_nothing(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    # the step forks a child that would outlive a kill of the step alone, as squashfuse or the
    # container's processes do
    hang = 'sleep 600 & echo $! > "$1"; wait'
    runtime = recording(tmp_path, lambda run: sh(hang, str(pidfile)))
    with pytest.raises(VerifyError, match="did not finish within 1s") as caught:
        verify_with(runtime, registry.ref, device="cpu", timeout=1)
    assert "NCCL" in caught.value.fix
    child = int(pidfile.read_text())
    assert gone_within(child, 30), f"the step's child sleep (pid {child}) outlived the timeout"
    assert (tmp_path / "cleanup.log").exists()
    assert entries(scratch) == []


def test_the_image_user_and_id_come_from_the_registry(registry: ConfigRegistry) -> None:
    found = identify(registry.ref)
    assert (found.image_id, found.platform, found.user, found.local) == (
        registry.config_digest,
        "linux/amd64",
        "10001:10002",
        False,
    )
    assert found.env == KEPT_ENV


class WantsImageEnv(ScriptedRuntime):
    wants_image_env = True  # as Charliecloud: the driver writes image.env before fetch


def test_a_runtime_that_wants_the_image_env_gets_it_as_lines_before_fetch(
    registry: ConfigRegistry, scratch: Path, tmp_path: Path
) -> None:
    copy = sh('cp "$1/image.env" "$2"', "{workdir}", str(tmp_path / "image.env"))
    runtime = WantsImageEnv(
        fetch=lambda run: [tuple(arg.replace("{workdir}", run.workdir) for arg in copy)],
        execute=lambda run: print_report("torch-cpu-passed.json"),
        cleanup=lambda run: [],
    )
    assert verify_with(runtime, registry.ref, device="cpu").passed
    assert (tmp_path / "image.env").read_text() == "".join(f"{item}\n" for item in KEPT_ENV)
    assert entries(scratch) == []


def test_an_image_env_value_with_a_newline_is_refused_before_any_fetch(scratch: Path, tmp_path: Path) -> None:
    config = {**CONFIG, "config": {"User": "0", "Env": ["GOOD=1", "BAD=two\nlines"]}}
    runtime = WantsImageEnv(
        fetch=lambda run: [sh('touch "$1"', str(tmp_path / "fetched"))],
        execute=lambda run: print_report("torch-cpu-passed.json"),
        cleanup=lambda run: [],
    )
    refused = pytest.raises(VerifyError, match="'BAD' to a value holding a newline")
    with ConfigRegistry(config) as served, refused:
        verify_with(runtime, served.ref, device="cpu")
    assert not (tmp_path / "fetched").exists()
    assert entries(scratch) == []


def as_user(uid: int, function) -> int:
    """Run `function` in a forked child that has dropped root for `uid`; its return is the exit code
    (3 for an exception). Root deletes inside read-only directories, so only a non-root child shows
    whether an unpacked image's 0555 directories would stay behind."""
    import os

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(uid)
            os.setuid(uid)
            code = function()
        except BaseException:
            code = 3
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_an_unpacked_tree_with_read_only_directories_is_removed_by_its_non_root_owner() -> None:
    import os
    import shutil
    import tempfile

    from envbuild.runtime.driver import remove_tree

    if os.geteuid() != 0:
        pytest.fail("needs root to drop to another user (CI runs as root)")
    # pytest's tmp_path sits under a 0700 directory the other user cannot enter
    tmp_path = Path(tempfile.mkdtemp(prefix="envbuild-test-rmtree-"))
    tmp_path.chmod(0o777)

    def unpacked(name: str) -> Path:
        tree = tmp_path / name
        (tree / "usr" / "lib").mkdir(parents=True)
        (tree / "usr" / "lib" / "libx.so").write_text("x")
        (tree / "usr" / "lib").chmod(0o555)
        (tree / "usr").chmod(0o555)
        return tree

    def plain() -> int:
        tree = unpacked("plain")
        try:
            shutil.rmtree(tree)
        except PermissionError:
            return 1
        return 0

    def robust() -> int:
        tree = unpacked("robust")
        remove_tree(str(tree))
        return 0 if not tree.exists() else 1

    nobody = 65534
    try:
        assert as_user(nobody, plain) == 1  # what the driver had: the tree stays
        assert as_user(nobody, robust) == 0
    finally:
        shutil.rmtree(tmp_path)
