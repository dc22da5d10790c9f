"""The smoke programs, run for real on this host's CPU, and each gate made to fail on purpose.

No GPU here: the GPU-only gates (driver, arch, memory, multi-GPU) are exercised through the same
functions the programs call, with the inputs a GPU would give them; the multi-GPU all-reduce runs
for real with torch.distributed's gloo backend across two CPU processes.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import glob
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import pytest

from envbuild.cli.app import main
from envbuild.smoke import program_files
from envbuild.smoke.programs import smoke_common as common
from envbuild.smoke.report import load_schema, validate
from tests.helpers.capability import missing
from tests.helpers.paths import REPO
from tests.helpers.signals import default_signals

FRAMEWORKS = ("torch", "tensorflow", "jax")
GPU_GATES = ("driver", "arch", "memory", "multi_gpu")
PROGRAMS = REPO / "envbuild" / "smoke" / "programs"


def smoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["smoke", "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


def assert_valid(report: dict) -> None:
    assert validate(report) == []
    jsonschema.validate(report, load_schema())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cpu_run_passes_every_cpu_gate(capsys: pytest.CaptureFixture[str], framework: str) -> None:
    code, report = smoke(capsys, "--framework", framework, "--device", "cpu", "--steps", "10")
    assert code == 0, report["failed"]
    assert_valid(report)
    assert report["framework"] == framework and report["device_used"] == "cpu"
    for gate in ("arguments", "import", "device", "placement", "training", "precision"):
        assert report["gates"][gate] == "passed", gate
    for gate in GPU_GATES:
        assert report["gates"][gate] == "skipped: cpu", gate  # never reported as passed
    assert report["gates"]["checks"] == "skipped: none configured" and report["checks"] == []
    assert report["loss_decreased"] is True and report["losses"][0] > report["loss_last"]
    assert report["throughput_samples_per_s"] > 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_learning_rate_zero_fails_the_training_gate(
    capsys: pytest.CaptureFixture[str], framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_SMOKE_LR", "0")
    code, report = smoke(capsys, "--framework", framework, "--device", "cpu", "--steps", "5")
    assert code == 1
    assert_valid(report)
    assert [f["gate"] for f in report["failed"]] == ["training"]
    assert "loss did not decrease" in report["failed"][0]["detail"]
    assert "optimizer" in report["failed"][0]["hint"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gpu_requested_on_a_cpu_host_fails_the_device_gate(
    capsys: pytest.CaptureFixture[str], framework: str
) -> None:
    code, report = smoke(capsys, "--framework", framework, "--device", "gpu", "--steps", "2")
    assert code == 1
    assert_valid(report)
    assert report["gates"]["device"] == "failed"
    assert "nvidia-smi" in report["failed"][0]["hint"] and "--gpus all" in report["failed"][0]["hint"]


def run_program(framework: str, *args: str, python: list[str] | None = None) -> tuple[int, dict]:
    with tempfile.TemporaryDirectory(prefix=f"envbuild-test-smoke-{framework}-") as workdir:
        for name, data in program_files(framework).items():
            (Path(workdir) / name).write_bytes(data)
        done = subprocess.run(
            [*(python or [sys.executable]), str(Path(workdir) / "smoke.py"), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout  # exactly one line: the report
    return done.returncode, json.loads(lines[0])


def test_missing_framework_fails_the_import_gate() -> None:
    code, report = run_program("torch", "--device", "cpu", python=[sys.executable, "-S", "-I"])
    assert code == 1
    assert_valid(report)
    assert report["failed"][0]["gate"] == "import"
    assert "not installed" in report["failed"][0]["hint"]


def test_bad_arguments_fail_the_arguments_gate() -> None:
    code, report = run_program("torch", "--steps", "0")
    assert code == 1
    assert report["failed"][0]["gate"] == "arguments"


def test_standalone_program_has_no_envbuild_import() -> None:
    for framework in FRAMEWORKS:
        for name, data in program_files(framework).items():
            source = data.decode()
            # envbuild is not installed in an image; the preflight guard (envbuild_preflight, its own
            # module in the image's site-packages) is the one envbuild-written module it may import
            assert not re.search(r"\b(from|import) envbuild\b(?!_preflight)", source), (framework, name)


def test_program_files_are_the_program_and_its_shared_module_unchanged() -> None:
    for framework in FRAMEWORKS:
        files = program_files(framework)
        assert list(files) == ["smoke.py", "smoke_common.py"]
        assert files["smoke.py"] == (PROGRAMS / f"{framework}_smoke.py").read_bytes()
        assert files["smoke_common.py"] == (PROGRAMS / "smoke_common.py").read_bytes()
    with pytest.raises(ValueError, match="mxnet"):
        program_files("mxnet")


def in_image_files() -> list[Path]:
    return sorted({PROGRAMS / "smoke_common.py", *(PROGRAMS / f"{f}_smoke.py" for f in FRAMEWORKS)})


@functools.cache
def python38() -> str | None:
    """A Python 3.8 interpreter to compile with: $ENVBUILD_TEST_PYTHON38, python3.8, or pyenv's."""
    candidates = [os.environ.get("ENVBUILD_TEST_PYTHON38"), shutil.which("python3.8")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python")))
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.stdout.strip() == "True":  # a pyenv shim without that version selected fails here
            return candidate
    return None


@pytest.mark.parametrize("path", in_image_files(), ids=lambda p: p.name)
def test_in_image_files_compile_as_python_3_8(path: Path) -> None:
    source = path.read_text()
    compile(source, path.name, "exec")
    ast.parse(source, path.name, feature_version=(3, 8))  # no syntax newer than the oldest image Python
    if python38() is None:
        why = "no Python 3.8 here (ENVBUILD_TEST_PYTHON38 names one) for the byte-compile check"
        missing(why)
    done = subprocess.run(
        [python38(), "-c", "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_smoke_defaults_are_defined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuild import smoke as exported
    from envbuild.image.verify import verify_image
    from envbuild.smoke.run import run_smoke

    defaults = (common.DEFAULT_STEPS, common.DEFAULT_PRECISION, common.DEFAULT_TIMEOUT_S)
    assert defaults == (20, "fp32", 600) and common.PRECISIONS == ("fp32", "fp16", "bf16")
    assert defaults == (exported.DEFAULT_STEPS, exported.DEFAULT_PRECISION, exported.DEFAULT_TIMEOUT_S)
    assert exported.PRECISIONS is common.PRECISIONS
    verify = inspect.signature(verify_image).parameters
    assert (verify["steps"].default, verify["precision"].default, verify["timeout"].default) == defaults
    assert inspect.signature(run_smoke).parameters["timeout"].default == common.DEFAULT_TIMEOUT_S
    for name in ("ENVBUILD_SMOKE_DEVICE", "ENVBUILD_SMOKE_STEPS", "ENVBUILD_SMOKE_PRECISION"):
        monkeypatch.delenv(name, raising=False)
    assert common.parse_args([], "torch")[:3] == ("auto", common.DEFAULT_STEPS, common.DEFAULT_PRECISION)


# --- the GPU gates, through the functions the programs call


def new_report() -> dict:
    return common.new_report("torch", "gpu", 5, "bf16")


def test_placement_gate_catches_a_batch_left_on_the_cpu() -> None:
    import torch

    from envbuild.smoke.programs import torch_smoke

    report = new_report()
    model = torch.nn.Linear(2, 2)  # on the CPU, while the program runs on cuda:0
    ok = torch_smoke.check_placement(report, torch.device("cuda:0"), model, [("batch", torch.zeros(1, 2))])
    assert ok is False and report["gates"]["placement"] == "failed"
    assert report["failed"][0]["hint"] == "model or batch is on the CPU: move both with .to(device)"


@pytest.mark.parametrize(
    ("capability", "arch_list", "state"),
    [
        ((12, 0), ["sm_50", "sm_80", "sm_90"], "failed"),  # RTX 5090 on a cu124 build
        ((8, 9), ["sm_80", "sm_86", "sm_90"], "passed"),  # L4 runs the sm_86 cubins
        ((12, 0), ["sm_80", "sm_90", "compute_90"], "passed"),  # through PTX JIT
        ((7, 0), ["sm_75", "sm_80"], "failed"),
        ((9, 0), None, "skipped: the framework does not report its compiled architectures"),
    ],
)
def test_arch_gate(capability: tuple[int, int], arch_list: list[str] | None, state: str) -> None:
    report = new_report()
    common.check_arch(report, capability, arch_list)
    assert report["gates"]["arch"] == state
    if state == "failed":
        assert report["failed"][0]["detail"].startswith(
            "no kernel image is available for execution on the device"
        )
        assert "envbuild resolve --gpu" in report["failed"][0]["hint"]


def test_memory_gate_fails_on_ooms_and_retries() -> None:
    clean = {"num_ooms": 0, "num_alloc_retries": 0, "fragmentation": 0.1}
    report = new_report()
    common.check_memory(report, clean)
    assert report["gates"]["memory"] == "passed"
    for stats in ({**clean, "num_ooms": 1}, {**clean, "num_alloc_retries": 3}):
        report = new_report()
        common.check_memory(report, stats)
        assert report["gates"]["memory"] == "failed"
        assert "expandable_segments" in report["failed"][0]["hint"]


@pytest.mark.parametrize(
    ("expression", "cuda", "driver", "expected"),
    [
        ("cuda>=12.4", "12.4", "550.54.15", True),
        ("cuda>=12.6", "12.4", "550.54.15", False),
        ("cuda>=12.6 brand=tesla,driver>=550,driver<551", "12.4", "550.54.15", False),  # brand unknown
        ("cuda>=12.6 driver>=550,driver<551", "12.4", "550.54.15", True),  # OR of an AND group
        ("cuda>=13.0", "13.0", "580.65.06", True),
        ("cuda>=11.8,driver>=520.61.05", "12.2", "535.54.03", True),
        ("cuda>=11.8,driver>=540", "12.2", "535.54.03", False),
    ],
)
def test_nvidia_require_cuda_evaluation(expression: str, cuda: str, driver: str, expected: bool) -> None:
    assert common.require_satisfied(expression, cuda, driver)[0] is expected


def test_driver_gate_against_the_image_requirement() -> None:
    for environ, state in (
        ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6"}, "failed"),
        ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, "passed"),
        ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_DISABLE_REQUIRE": "true"}, "passed"),
        ({}, "passed"),
    ):
        report = new_report()
        report["driver"] = {"version": "550.54.15", "cuda": "12.4"}
        common.check_driver(report, environ)
        assert report["gates"]["driver"] == state, environ
    assert "too old" in report_failure({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6"})


def report_failure(environ: dict) -> str:
    report = new_report()
    report["driver"] = {"version": "550.54.15", "cuda": "12.4"}
    common.check_driver(report, environ)
    return report["failed"][0]["hint"]


def test_multi_gpu_gate_all_reduce_and_hang(tmp_path: Path) -> None:
    from envbuild.smoke.programs import torch_smoke

    value, seconds = torch_smoke.run_allreduce(2, backend="gloo", timeout=120)
    report = new_report()
    common.record_allreduce(report, value, 2, seconds, 120)
    assert value == 3.0 and report["gates"]["multi_gpu"] == "passed"
    value, seconds = torch_smoke.run_allreduce(2, backend="gloo", timeout=5, hang_rank=1)
    report = new_report()
    common.record_allreduce(report, value, 2, seconds, 5)
    assert value is None and report["gates"]["multi_gpu"] == "failed"
    assert "NCCL_DEBUG=INFO" in report["failed"][0]["hint"] and "single GPU" in report["failed"][0]["hint"]


# --- the run the three programs share, down its GPU branch with a framework that only pretends


class PretendProgram(common.Program):
    framework = "torch"
    modules = ("json",)  # anything importable stands in for the framework
    broken_hint = "not used"
    environ = (("ENVBUILD_TEST_PRETEND", "set before the import"),)
    training_hints = ((("out of memory",), "free the GPU", True),)

    def __init__(self, gpus: int, training_error: str | None = None) -> None:
        self.gpus, self.training_error, self.calls = gpus, training_error, []

    def collect_environment(self, fw, report: dict) -> list:
        report["arch_list"] = ["sm_90"]
        return [f"gpu{index}" for index in range(self.gpus)]

    def no_gpu_says(self, report: dict) -> str:
        return "the pretend framework sees none"

    def select_device(self, fw, report: dict, gpus: list, on_gpu: bool) -> str:
        report["device_used"] = report["framework_device"] = "cuda:0" if on_gpu else "cpu"
        return gpus[0] if on_gpu else "cpu"

    def compute_capability(self, fw, report: dict, device: str, gpus: list) -> tuple[int, int]:
        return (9, 0)

    def train(self, fw, report: dict, device: str, steps: int, precision: str) -> None:
        self.calls.append(("train", device, steps, precision))
        if self.training_error:
            raise RuntimeError(self.training_error)
        for gate in ("placement", "training", "precision"):
            common.passed(report, gate)

    def check_multi_gpu(self, fw, report: dict, gpus: list) -> None:
        self.calls.append(("multi_gpu", gpus))
        common.record_allreduce(report, 3.0, len(gpus), 0.1, 120)


def run_pretend(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, program: PretendProgram, *argv: str
) -> tuple[int, dict]:
    for name in (
        "ENVBUILD_TEST_PRETEND",
        "ENVBUILD_SMOKE_CPU_FP16",
        "ENVBUILD_SMOKE_STEPS",
        "ENVBUILD_SMOKE_DEVICE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(common, "driver_info", lambda: {"version": "570.86.15", "cuda": "12.8"})
    code = program.run(list(argv))
    report = json.loads(capsys.readouterr().out)
    assert_valid(report)
    assert os.environ["ENVBUILD_TEST_PRETEND"] == "set before the import"
    return code, report


def test_shared_run_on_one_gpu(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    program = PretendProgram(gpus=1)
    code, report = run_pretend(
        capsys, monkeypatch, program, "--device", "gpu", "--steps", "3", "--precision", "fp16"
    )
    assert code == 0, report["failed"]
    assert program.calls == [("train", "gpu0", 3, "fp16")]  # fp16 stays fp16 on a GPU
    assert report["device_used"] == "cuda:0" and report["precision_effective"] == "fp16"
    assert {gate: report["gates"][gate] for gate in GPU_GATES} == {
        "driver": "passed",
        "arch": "passed",
        "memory": "skipped: allocator statistics are a torch feature",
        "multi_gpu": "skipped: one GPU visible",
    }


def test_shared_run_on_two_gpus_and_a_failing_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    program = PretendProgram(gpus=2)
    code, report = run_pretend(capsys, monkeypatch, program, "--device", "auto")
    assert code == 0 and program.calls[-1] == ("multi_gpu", ["gpu0", "gpu1"])
    assert report["gates"]["multi_gpu"] == "passed" and report["steps"] == common.DEFAULT_STEPS

    program = PretendProgram(gpus=2, training_error="CUDA Out Of Memory")
    code, report = run_pretend(capsys, monkeypatch, program, "--device", "gpu")
    assert code == 1 and [call[0] for call in program.calls] == ["train"]  # no all-reduce after a failure
    assert report["failed"] == [
        {"gate": "training", "detail": "RuntimeError: CUDA Out Of Memory", "hint": "free the GPU"}
    ]


def test_shared_run_without_a_gpu(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report = run_pretend(
        capsys, monkeypatch, PretendProgram(gpus=0), "--device", "gpu", "--import", "json"
    )
    assert code == 1 and report["gates"]["device"] == "failed"
    assert report["gates"]["checks"] == "skipped: not reached" and report["checks"] == []
    assert "the pretend framework sees none" in report["failed"][0]["detail"]

    program = PretendProgram(gpus=1)
    code, report = run_pretend(capsys, monkeypatch, program, "--device", "cpu", "--precision", "fp16")
    assert code == 0 and program.calls == [("train", "cpu", common.DEFAULT_STEPS, "bf16")]
    assert report["notes"] == ["fp16 is a GPU precision: ran bf16 on the CPU instead"]
    assert all(report["gates"][gate] == "skipped: cpu" for gate in GPU_GATES)


# --- the user's checks ([smoke] imports and command), run for real after the training step (issue 32)

DEVICE_CHECK = (  # exits 0 only where the checks see the smoke step's device: a CPU step's, no GPU
    "python -c \"import os, sys; sys.exit(os.environ['ENVBUILD_SMOKE_DEVICE'] != 'cpu' or "
    "os.environ['CUDA_VISIBLE_DEVICES'] != '')\""
)


def test_checks_run_after_the_training_step_and_a_missing_module_fails_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = smoke(
        capsys,
        *("--framework", "torch", "--device", "cpu", "--steps", "3"),
        *("--import", "json", "--import", "envbuild_no_such_module", "--command", DEVICE_CHECK),
    )
    assert code == 1
    assert_valid(report)
    assert report["gates"]["training"] == "passed" and report["gates"]["checks"] == "failed"
    json_check, missing, command = report["checks"]
    assert (json_check["kind"], json_check["name"], json_check["passed"]) == ("import", "json", True)
    assert json_check["output"] is None and json_check["seconds"] >= 0
    assert (missing["name"], missing["passed"], missing["exit_code"]) == ("envbuild_no_such_module", False, 1)
    assert "No module named 'envbuild_no_such_module'" in missing["output"].splitlines()[-1]
    assert (command["kind"], command["passed"], command["exit_code"]) == ("command", True, 0)
    assert [failure["gate"] for failure in report["failed"]] == ["checks"]  # the import, only
    assert "import envbuild_no_such_module failed (exit 1)" in report["failed"][0]["detail"]
    assert "[packages] pip" in report["failed"][0]["hint"]
    assert report["timings_s"]["checks"] >= 0


def test_a_failing_command_fails_the_checks_with_its_last_lines_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    selftest = (
        'python -c \'import sys; [print("selftest line", n) for n in range(50)]; '
        'print("Authorization: Bearer sekret-token-123"); sys.exit(3)\''
    )
    code, report = smoke(
        capsys, "--framework", "torch", "--device", "cpu", "--steps", "2", "--command", selftest
    )
    assert code == 1
    assert_valid(report)
    (command,) = report["checks"]
    assert (command["passed"], command["exit_code"]) == (False, 3)
    assert command["name"] == selftest.replace(
        "Bearer sekret-token-123", "***"
    )  # the command is redacted too
    lines = command["output"].splitlines()
    assert len(lines) == common.CHECK_OUTPUT_LINES and lines[0] == "selftest line 31"
    assert lines[-1] == "Authorization: ***" and "sekret" not in json.dumps(report)
    assert report["failed"][0]["detail"].endswith("failed (exit 3): Authorization: ***")


def test_the_image_checks_file_is_run_and_each_flag_replaces_its_kind(tmp_path: Path) -> None:
    """An image carries its [smoke] checks beside the program; --import replaces the imports only."""
    from envbuild.smoke import CHECKS_FILE, checks_file

    files = {**program_files("torch"), CHECKS_FILE: checks_file(("json",), "python -c 'print(1)'")}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    argv = [sys.executable, str(tmp_path / "smoke.py"), "--device", "cpu", "--steps", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, report["failed"]
    assert [(c["kind"], c["name"]) for c in report["checks"]] == [
        ("import", "json"),
        ("command", "python -c 'print(1)'"),
    ]
    done = subprocess.run(
        [*argv, "--import", "envbuild_no_such_module"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 1
    assert [(c["kind"], c["name"], c["passed"]) for c in report["checks"]] == [
        ("import", "envbuild_no_such_module", False),
        ("command", "python -c 'print(1)'", True),  # the image's command still runs
    ]


def test_checks_that_cannot_run_or_crash_are_reported_not_lost(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each check runs in its own process: a segfault or a missing program is the check's failure, and the
    report still comes out. On a GPU the checks see it: no CUDA_VISIBLE_DEVICES is forced on them."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    crash = "python -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'"
    code, report = run_pretend(
        capsys, monkeypatch, PretendProgram(gpus=1), "--device", "gpu", "--command", crash
    )
    assert code == 1 and report["checks"][0]["exit_code"] == -11
    assert report["failed"][0]["detail"].startswith(f"command `{crash}` failed (killed by SIGSEGV): ")

    code, report = run_pretend(
        capsys, monkeypatch, PretendProgram(gpus=1), "--command", "envbuild-no-such-program --check"
    )
    assert code == 1 and report["checks"][0]["exit_code"] is None
    assert "cannot run envbuild-no-such-program: No such file or directory" in report["failed"][0]["detail"]
    assert "full path" in report["failed"][0]["hint"]

    on_gpu = (
        'python -c "import os, sys; '
        "sys.exit(os.environ['ENVBUILD_SMOKE_DEVICE'] != 'gpu' or 'CUDA_VISIBLE_DEVICES' in os.environ)\""
    )
    code, report = run_pretend(
        capsys, monkeypatch, PretendProgram(gpus=1), "--device", "gpu", "--command", on_gpu
    )
    assert code == 0 and report["gates"]["checks"] == "passed", report["failed"]


# --- the schema


def good_report(capsys: pytest.CaptureFixture[str]) -> dict:
    return smoke(capsys, "--framework", "torch", "--device", "cpu", "--steps", "3")[1]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.pop("gates"),
        lambda r: r.update(passed="yes"),
        lambda r: r.update(framework="mxnet"),
        lambda r: r["gates"].update(training="ok"),
        lambda r: r["failed"].append({"gate": "training"}),
        lambda r: r.update(steps=0),
        lambda r: r["devices"][0].update(kind="tpu"),
    ],
)
def test_schema_rejects_bad_reports(capsys: pytest.CaptureFixture[str], mutate) -> None:
    report = copy.deepcopy(good_report(capsys))
    assert_valid(report)
    mutate(report)
    assert validate(report)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, load_schema())


def test_schema_cross_checks_passed_and_failed(capsys: pytest.CaptureFixture[str]) -> None:
    report = good_report(capsys)
    report["gates"]["training"] = "failed"  # schema-valid, but no failure names it and passed is true
    assert any("no entry in failed" in e for e in validate(report))


# --- signals: SIGTERM and SIGHUP end `envbuild smoke` like Ctrl-C, its child included (issue 14) ----


def smoke_child(parent: subprocess.Popen[str]) -> int:
    """The pid of the smoke program `envbuild smoke` runs, once it runs."""
    children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
    while True:
        assert parent.poll() is None, parent.communicate()
        for pid in children.read_text().split():
            with contextlib.suppress(OSError):
                if b"smoke.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
        time.sleep(0.05)


def start_long_smoke(*ignored: signal.Signals) -> subprocess.Popen[str]:
    """`envbuild smoke` with 10,000 steps, from default signal handling but for `ignored`."""
    command = [str(Path(sys.executable).with_name("envbuild")), "smoke", "--framework", "torch"]
    return subprocess.Popen(
        [*command, "--device", "cpu", "--steps", "10000"],  # the most --steps takes; signalled long before
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals(*ignored),
    )


@pytest.mark.parametrize(
    ("sent", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_ends_envbuild_smoke_and_its_program(sent: signal.Signals, exit_code: int) -> None:
    process = start_long_smoke()
    child = smoke_child(process)
    process.send_signal(sent)
    _, err = process.communicate(timeout=60)
    assert process.returncode == exit_code, err
    assert err.strip().splitlines()[-1] == f"interrupted by {sent.name}"
    assert not Path(f"/proc/{child}").exists()  # killed and reaped, not orphaned


def test_a_hangup_ignored_by_nohup_stays_ignored() -> None:
    process = start_long_smoke(signal.SIGHUP)
    child = smoke_child(process)
    process.send_signal(signal.SIGHUP)  # discarded: had it been handled, the exit would be 129 (or -1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert err.strip().splitlines()[-1] == "interrupted by SIGTERM"
    assert not Path(f"/proc/{child}").exists()
