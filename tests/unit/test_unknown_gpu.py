"""doctor and init on a GPU the catalogue lacks (issue 34 item 2): judged by nvidia-smi's compute_cap,
said to be unknown with how to add its row, and never a failed host for being unknown.

The GPU is the GeForce RTX 5060 Ti of the 610.43.02 capture (tests/fixtures/nvidia-smi/SOURCES.md),
compute capability 12.0 as NVIDIA's CUDA GPUs page lists the GeForce RTX 50 series. Its row is
taken out of a matrix copy, so the tests stay true once the catalogue lists it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.host.doctor import check_gpu_support
from envbuild.host.nvsmi import SmiReport, parse_query
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from tests.helpers.gpurows import without_gpu_row
from tests.helpers.nvsmi import by_name, doctor

RTX_5060_TI = "NVIDIA GeForce RTX 5060 Ti"
# the capture's banner row as the query answers it: 947/16311 MiB, 36C, 10W of 180W
QUERY_5060 = (
    f"0, {RTX_5060_TI}, GPU-5060, 610.43.02, 12.0, 947, 16311, 0, 36, 10.00, 180.00, 0x0000000000000001\n"
)
H100_ROW = (
    "1, NVIDIA H100 80GB HBM3, GPU-h100, {driver}, 9.0, 1, 81559, 0, 30, 70.00, 700.00, 0x0000000000000001\n"
)


@pytest.fixture
def lacking(matrix_copy: Path) -> Matrix:
    return load_matrix(without_gpu_row(matrix_copy, "RTX 5060 Ti"))


def report(csv: str, driver: str) -> SmiReport:
    return SmiReport(
        driver_version=driver, cuda_version=None, gpus=tuple(parse_query(csv)), source="query", brand=None
    )


def test_an_unknown_gpu_is_judged_by_its_capability_and_warned_about(lacking: Matrix) -> None:
    check = check_gpu_support(lacking, report(QUERY_5060, "610.43.02"))
    assert check.status == "warn"
    assert f"{RTX_5060_TI} (compute capability 12.0: R570 or later)" in check.evidence
    assert (
        f"{RTX_5060_TI} is not in the GPU catalogue: judged by its compute capability 12.0" in check.evidence
    )
    fix = check.fix or ""
    assert f"add a [[gpu]] row for {RTX_5060_TI!r} to a copy of matrix/gpus.toml" in fix
    assert 'compute_capability = "12.0"' in fix and "envbuild matrix check --matrix DIR" in fix
    assert "--gpu 12.0" in fix


def test_an_unknown_gpu_on_a_driver_too_old_for_its_capability_fails(lacking: Matrix) -> None:
    check = check_gpu_support(lacking, report(QUERY_5060.replace("610.43.02", "560.35.03"), "560.35.03"))
    assert check.status == "fail"  # the driver, not the name: R560 runs no Blackwell 12.0 GPU
    assert "needs R570 or later" in check.evidence
    assert "not in the GPU catalogue" in check.evidence
    assert "matrix/gpus.toml" in (check.fix or "")


def test_a_known_gpu_beside_one_without_a_capability(lacking: Matrix) -> None:
    csv = QUERY_5060.replace(", 12.0,", ", [N/A],") + H100_ROW.format(driver="610.43.02")
    check = check_gpu_support(lacking, report(csv, "610.43.02"))
    assert check.status == "warn"
    assert "NVIDIA H100 80GB HBM3 (H100: R520 or later)" in check.evidence
    assert f"{RTX_5060_TI} is not in the GPU catalogue and nvidia-smi reported no compute capability" in (
        check.evidence
    )


def test_known_gpus_alone_are_ok(lacking: Matrix) -> None:
    check = check_gpu_support(lacking, report(H100_ROW.format(driver="550.54.15"), "550.54.15"))
    assert (check.status, check.fix) == ("ok", None)
    assert "not in the GPU catalogue" not in check.evidence


def test_through_the_doctor_with_the_captured_banner(
    capsys: pytest.CaptureFixture[str], fake_smi, matrix_copy: Path
) -> None:
    fake_smi("banner_kmd_610_rtx5060ti_processes.txt", query_csv=QUERY_5060)
    _, result = doctor(capsys, "--matrix", str(without_gpu_row(matrix_copy, "RTX 5060 Ti")))
    checks = by_name(result)
    gpus = checks["driver vs GPUs"]
    assert gpus["status"] == "warn"
    assert "judged by its compute capability 12.0" in gpus["evidence"]
    assert "matrix check" in gpus["fix"]
    assert checks["GPU 0"]["status"] != "fail"


def test_init_writes_an_unknown_gpu_as_its_capability_and_says_so(
    capsys: pytest.CaptureFixture[str], fake_smi, matrix_copy: Path, tmp_path: Path
) -> None:
    from envbuild.cli.app import main
    from envbuild.spec.model import load_spec

    fake_smi("banner_kmd_610_rtx5060ti_processes.txt", query_csv=QUERY_5060)
    spec = tmp_path / "envbuild.toml"
    matrix_dir = str(without_gpu_row(matrix_copy, "RTX 5060 Ti"))
    code = main(["init", "-f", str(spec), "--matrix", matrix_dir])
    out = capsys.readouterr().out
    assert code == 0
    assert load_spec(str(spec)).targets[0].stack.gpus == ("sm_120",)
    assert (
        f"nvidia-smi reports GPU {RTX_5060_TI!r}, which the GPU catalogue does not know: written as its "
        in out
    )
    assert "compute capability sm_120; to name it, add its [[gpu]] row" in out
