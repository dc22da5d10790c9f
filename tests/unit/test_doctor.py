"""`envbuild doctor` against real nvidia-smi captures (tests/fixtures/nvidia-smi/SOURCES.md says where
each came from), served by a fake `nvidia-smi` on PATH so the real subprocess path runs, and against
the real dockerd for the Engine checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from envbuild import __version__
from envbuild.cli.app import main
from envbuild.host.nvsmi import parse_banner, parse_query, reason_names
from envbuild.lockfile.model import Lock, LockedPackage, LockedTarget, write_lock
from envbuild.smoke.programs.smoke_common import require_satisfied
from tests.helpers.nvsmi import CAPTURES, CU124_ARCH, by_name, doctor
from tests.helpers.registry import LoopbackServer, RegistryHandler


def write_cuda_lock(
    path: Path,
    cuda: str,
    min_driver: str,
    compat: str = "native",
    base: str = "ubuntu:22.04@sha256:" + "b" * 64,
) -> Path:
    stack = tuple(
        sorted(
            {
                "framework": "torch",
                "framework_version": "2.5.1",
                "variant": "cu124",
                "cuda": cuda,
                "min_driver": min_driver,
                "compat": compat,
                "arch": CU124_ARCH,
            }.items()
        )
    )
    target = LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="wheels" if base.startswith("ubuntu") else "base-image",
        python="3.11",
        base_image=base,
        requirements=("torch==2.5.1",),
        stack=stack,
        packages=(
            LockedPackage(
                name="torch",
                version="2.5.1",
                layer="framework",
                index="https://pypi.org/simple",
                hashes=("sha256:" + "c" * 64,),
            ),
        ),
        conda=(),
    )
    write_lock(
        str(path), Lock(envbuild=__version__, spec_digest="d" * 64, matrix_digest="e" * 64, targets=(target,))
    )
    return path


# --- parsing the captures


def test_banner_captures_parse() -> None:
    a100 = parse_banner((CAPTURES / "banner_535_a100_4gpu_processes.txt").read_text())
    assert (a100.driver_version, a100.cuda_version, len(a100.gpus)) == ("535.216.01", "12.2", 4)
    assert a100.gpus[0].name == "NVIDIA A100-SXM4-80GB" and a100.gpus[0].memory_total_mib == 81920
    assert [p.used_mib for p in a100.gpus[0].processes] == [3606]
    h100 = parse_banner((CAPTURES / "banner_550_h100_8gpu.txt").read_text())
    assert (h100.driver_version, h100.cuda_version, len(h100.gpus)) == ("550.127.05", "12.4", 8)
    assert all(g.name == "NVIDIA H100 80GB HBM3" for g in h100.gpus)


def test_new_banner_wording_parses() -> None:
    kmd = [p for p in CAPTURES.glob("banner_kmd_*.txt")]
    text = (
        kmd[0].read_text()
        if kmd
        else ("| NVIDIA-SMI 610.43.02      KMD Version: 610.43.02      CUDA UMD Version: 13.3     |\n")
    )
    report = parse_banner(text)
    assert report.driver_version and report.driver_version.startswith("61")
    assert report.cuda_version and report.cuda_version.startswith("13.")


def test_query_csv_and_event_reasons() -> None:
    csv = (
        "0, NVIDIA H100 80GB HBM3, GPU-1, 550.127.05, 9.0, 1, 81559, 0, 31, 70.12, 700.00, "
        "0x0000000000000001\n"
        "1, NVIDIA H100 80GB HBM3, GPU-2, 550.127.05, 9.0, 40000, 81559, 99, 88, 690.00, 700.00, "
        "0x0000000000000060\n"
    )
    gpus = parse_query(csv)
    assert gpus[0].compute_capability == (9, 0) and gpus[1].temperature_c == 88
    assert reason_names(gpus[0].event_reasons) == ([], [])
    assert reason_names(gpus[1].event_reasons)[0] == ["SW thermal slowdown", "HW thermal slowdown"]


# --- NVIDIA_REQUIRE_CUDA as the Container Toolkit evaluates it, on the strings nvidia/cuda images carry

BRANDS = (
    "unknown",
    "grid",
    "tesla",
    "nvidia",
    "quadro",
    "quadrortx",
    "nvidiartx",
    "vapps",
    "vpc",
    "vcs",
    "vws",
    "cloudgaming",
)


def image_requirement(cuda: str, branches: tuple[int, ...]) -> str:
    """The NVIDIA_REQUIRE_CUDA shape of nvidia/cuda 12.5+ images (compat_hw.toml section 7)."""
    return " ".join(
        [f"cuda>={cuda}"] + [f"brand={b},driver>={br},driver<{br + 1}" for br in branches for b in BRANDS]
    )


@pytest.mark.parametrize(
    ("requirement", "cuda", "driver", "brand", "expected"),
    [
        (image_requirement("12.8", (470, 535, 550, 560, 565)), "12.2", "535.216.01", "Tesla", True),
        (image_requirement("12.8", (470, 535, 550, 560, 565)), "12.2", "535.216.01", "GeForce", False),
        (image_requirement("12.8", (470, 535, 550, 560, 565)), "12.9", "575.57.08", "GeForce", True),
        (image_requirement("13.0", (535, 550, 565, 570, 575)), "12.4", "550.127.05", "Tesla", True),
        (image_requirement("13.0", (535, 550, 565, 570, 575)), "12.6", "560.35.05", "Tesla", False),
        ("cuda>=12.4", "12.2", "535.216.01", None, False),
    ],
)
def test_require_cuda_with_brand_clauses(requirement, cuda, driver, brand, expected) -> None:
    assert require_satisfied(requirement, cuda, driver, brand)[0] is expected


# --- the doctor, end to end through the fake nvidia-smi


def test_driver_535_cannot_start_a_cuda_12_4_stack(capsys, fake_smi, tmp_path: Path) -> None:
    fake_smi("banner_535_a100_4gpu_processes.txt")
    lock = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "550.54.14")
    code, report = doctor(capsys, "--lock", str(lock))
    assert code == 1
    checks = by_name(report)
    assert checks["nvidia-smi"]["status"] == "ok" and "535.216.01" in checks["nvidia-smi"]["evidence"]
    assert "runs CUDA <= 12.2 natively" in checks["driver vs matrix"]["evidence"]
    assert "--compat minor adds CUDA 12.3-" in checks["driver vs matrix"]["evidence"]
    verdict = checks["lock default"]
    assert verdict["status"] == "fail"
    assert verdict["evidence"].startswith(
        "will not start natively: CUDA 12.4 needs driver >= 550.54.14; this host has 535.216.01 (CUDA 12.2)"
    )
    assert "NVIDIA_REQUIRE_CUDA (cuda>=12.4)" in verdict["evidence"]
    assert verdict["fix"].startswith("upgrade the driver to >= 550.54.14 (R550 or newer)")
    assert "envbuild resolve --driver 535.216.01" in verdict["fix"] and 'compat = "minor"' in verdict["fix"]
    assert checks["GPU 0"]["status"] == "warn" and "3606 MiB" in checks["GPU 0"]["evidence"]


def test_text_output_is_a_checklist(capsys, fake_smi, tmp_path: Path) -> None:
    fake_smi("banner_535_a100_4gpu_processes.txt")
    lock = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "550.54.14")
    assert main(["doctor", "--lock", str(lock)]) == 1
    out = capsys.readouterr().out
    assert "[fail] lock default" in out and "fix: upgrade the driver" in out
    assert out.rstrip().splitlines()[-1].endswith("checks")


def test_driver_550_runs_it_natively_and_covers_h100(capsys, fake_smi, tmp_path: Path) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    lock = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "550.54.14")
    _, report = doctor(capsys, "--lock", str(lock))
    checks = by_name(report)
    assert checks["lock default"]["status"] == "ok"
    assert checks["lock default"]["evidence"].startswith("runs natively")
    assert checks["lock default GPUs"]["status"] == "ok"


def test_eol_base_image_in_the_lock_is_a_warning_with_the_way_out(
    capsys, fake_smi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    monkeypatch.setenv("ENVBUILD_TODAY", "2026-11-29")
    base = "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04@sha256:" + "b" * 64
    lock = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "550.54.14", base=base)
    _, report = doctor(capsys, "--lock", str(lock))
    check = by_name(report)["lock default base image"]
    assert check["status"] == "warn"  # a warning, not a failure: it still runs today
    assert check["evidence"].startswith(
        "base image nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 is past end of life"
    )
    assert "nearest supported release nvidia/cuda:13.0.2-cudnn-runtime-ubuntu22.04" in check["fix"]
    # a lock on a supported release gets no such check
    monkeypatch.setenv("ENVBUILD_TODAY", "2024-06-01")
    _, report = doctor(capsys, "--lock", str(lock))
    assert "lock default base image" not in by_name(report)


def test_minor_compat_stack_runs_on_535(capsys, fake_smi, tmp_path: Path) -> None:
    fake_smi("banner_535_a100_4gpu_processes.txt")
    lock = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "525.60.13", compat="minor")
    _, report = doctor(capsys, "--lock", str(lock))
    assert by_name(report)["lock default"]["evidence"].startswith("runs via minor-version compatibility")


def test_query_path_hot_and_throttled_gpus(capsys, fake_smi) -> None:
    row = "{}, NVIDIA H100 80GB HBM3, GPU-{}, 550.127.05, 9.0, 1, 81559, {}, {}, 690.00, 700.00, {}\n"
    csv = row.format(0, "a", 0, 31, "0x0000000000000001") + row.format(1, "b", 97, 91, "0x0000000000000000")
    csv += row.format(2, "c", 97, 70, "0x0000000000000008")
    fake_smi(
        "banner_550_h100_8gpu.txt", query_csv=csv, q="    Product Brand                         : NVIDIA\n"
    )
    _, report = doctor(capsys)
    checks = by_name(report)
    assert "from the query" in checks["nvidia-smi"]["evidence"]
    assert checks["GPU 0"]["status"] == "ok" and "compute capability 9.0" in checks["GPU 0"]["evidence"]
    assert checks["GPU 1"]["status"] == "warn" and "running hot" in checks["GPU 1"]["evidence"]
    assert checks["GPU 2"]["status"] == "warn" and "HW slowdown" in checks["GPU 2"]["evidence"]


def test_no_nvidia_smi_fails_and_docker_checks_still_run(capsys, monkeypatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, report = doctor(capsys)
    assert code == 1
    checks = by_name(report)
    assert checks["nvidia-smi"]["status"] == "fail"
    assert checks["nvidia-smi"]["evidence"] == "no NVIDIA driver visible: nvidia-smi not found"
    assert "docker engine" in checks and checks["driver vs matrix"]["status"] == "skip"


def test_q_throttle_capture_marks_the_gpu(capsys, fake_smi) -> None:
    from envbuild.host.nvsmi import parse_q_reasons

    capture = (CAPTURES / "q_throttle_hw_power_brake_v100_section.txt").read_text()
    assert reason_names(parse_q_reasons(capture)[0])[0] == ["HW slowdown", "HW power brake slowdown"]
    fake_smi("banner_470_geforce_processes.txt", q=capture)  # banner path: reasons come from -q
    _, report = doctor(capsys)
    gpu = by_name(report)["GPU 0"]
    assert gpu["status"] == "warn"
    # the slowdown -q reports, and nothing else: its 393 MiB of processes are below the busy threshold
    assert gpu["evidence"] == (
        "NVIDIA GeForce ..., 393/16116 MiB used, 55C; slowed down: HW slowdown, HW power brake slowdown"
    )
    assert gpu["fix"].startswith("thermal or power slowdown: check cooling and power delivery")


def test_kmd_capture_through_the_doctor(capsys, fake_smi) -> None:
    fake_smi("banner_kmd_610_rtx5060ti_processes.txt")
    _, report = doctor(capsys)
    checks = by_name(report)
    assert "driver 610.43.02, CUDA 13.3" in checks["nvidia-smi"]["evidence"]
    assert "runs CUDA <= 13.3 natively" in checks["driver vs matrix"]["evidence"]


# --- what a broken or wedged nvidia-smi says (issue 14, item 8): every answer is a checklist, never a crash


def test_invalid_utf8_in_nvidia_smi_output_is_replaced(capsys, fake_smi) -> None:
    banner = (CAPTURES / "banner_550_h100_8gpu.txt").read_bytes().replace(b"H100", b"H\xff\xfe00")
    fake_smi(banner)
    code, report = doctor(capsys)
    checks = by_name(report)
    assert checks["nvidia-smi"]["status"] == "ok"
    assert "NVIDIA H\ufffd\ufffd00 80GB HBM3" in checks["nvidia-smi"]["evidence"]
    assert checks["driver vs matrix"]["status"] == "ok"
    assert code in (0, 1)  # 1 where this host's Engine has no NVIDIA runtime; never a crash


@pytest.mark.parametrize("value", ["nan", "1e400", "-inf"])
def test_non_finite_numbers_from_nvidia_smi_count_as_not_reported(capsys, fake_smi, value: str) -> None:
    csv = (
        f"0, NVIDIA H100 80GB HBM3, GPU-a, 550.127.05, 9.0, {value}, 81559, {value}, {value}, {value}, "
        f"{value}, 0x0000000000000000\n"
    )
    gpu = parse_query(csv)[0]
    assert (gpu.memory_used_mib, gpu.temperature_c, gpu.utilization_pct, gpu.power_w) == (None,) * 4
    assert gpu.memory_total_mib == 81559
    fake_smi("banner_550_h100_8gpu.txt", query_csv=csv)
    _, report = doctor(capsys)
    checks = by_name(report)
    assert checks["nvidia-smi"]["status"] == "ok" and "from the query" in checks["nvidia-smi"]["evidence"]
    assert checks["GPU 0"]["status"] == "ok"
    assert "81559 MiB total, use not reported" in checks["GPU 0"]["evidence"]
    assert "None" not in checks["GPU 0"]["evidence"]


def test_empty_nvidia_smi_output_is_a_failed_check_with_a_fix(capsys, fake_smi) -> None:
    fake_smi(b"")
    code, report = doctor(capsys)
    assert code == 1
    check = by_name(report)["nvidia-smi"]
    assert check["status"] == "fail"
    assert check["evidence"] == "nvidia-smi exited 0 but printed nothing"
    assert "nvidia-smi" in check["fix"] and "reinstall" in check["fix"]


def test_slow_nvidia_smi_meets_one_overall_deadline(fake_smi) -> None:
    fake_smi("banner_550_h100_8gpu.txt", sleep_s=300)
    done = subprocess.run(
        [sys.executable, "-m", "envbuild", "doctor", "--json", "--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard only: without a deadline the fake would answer after 300 s per call
        check=False,
    )
    assert done.returncode == 1, done.stderr
    checks = by_name(json.loads(done.stdout))
    smi = checks["nvidia-smi"]
    assert smi["status"] == "fail"
    assert smi["evidence"] == "did not finish within the doctor's 2 s deadline (--timeout)"
    assert "--timeout" in smi["fix"] and "nvidia-smi" in smi["fix"]
    engine = checks["docker engine"]
    assert engine["status"] == "fail" and engine["evidence"].startswith("not run: the 2 s deadline")


class _SilentEngine(RegistryHandler):
    """An Engine API endpoint that accepts the connection and never answers (a wedged dockerd)."""

    release = threading.Event()

    def do_GET(self) -> None:
        self.release.wait(120)
        self.reply(503, b"{}")


def test_a_wedged_engine_meets_the_same_deadline(capsys, fake_smi, monkeypatch) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    _SilentEngine.release.clear()
    with LoopbackServer(_SilentEngine) as engine:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://{engine.host}")
        try:
            code, report = doctor(capsys, "--timeout", "2")
        finally:
            _SilentEngine.release.set()
    assert code == 1
    checks = by_name(report)
    assert checks["nvidia-smi"]["status"] == "ok"
    assert checks["docker engine"]["status"] == "fail"
    assert (
        checks["docker engine"]["evidence"] == "did not finish within the doctor's 2 s deadline (--timeout)"
    )


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_timeout_must_be_a_positive_number_of_seconds(value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "envbuild", "doctor", f"--timeout={value}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "--timeout" in done.stderr and value in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # refused before any check ran


def test_lock_that_is_a_directory_is_a_usage_error(capsys, fake_smi, tmp_path: Path) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    assert main(["doctor", "--lock", str(lock_dir)]) == 2
    err = capsys.readouterr().err
    assert f"--lock {lock_dir} is a directory" in err
    assert "fix: pass the lock file itself" in err and "internal error" not in err


def test_a_lock_whose_stack_records_no_cuda_is_a_failed_check_not_a_crash(
    capsys, fake_smi, tmp_path: Path
) -> None:
    from envbuild.lockfile.model import write_lock
    from envbuild.lockfile.read import load_lock

    fake_smi("banner_550_h100_8gpu.txt")
    path = write_cuda_lock(tmp_path / "envbuild.lock", "12.4", "550.54.14")
    lock, _ = load_lock(str(path))
    target = lock.targets[0]
    write_lock(
        str(path),
        lock.replace(targets=(target.replace(stack=tuple(i for i in target.stack if i[0] != "cuda")),)),
    )
    _, report = doctor(capsys, "--lock", str(path))
    check = by_name(report)["lock default"]
    assert check["status"] == "fail" and "records no cuda in [target.stack]" in check["evidence"]
