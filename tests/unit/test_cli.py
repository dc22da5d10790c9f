"""`envbuild resolve` and `envbuild matrix` as a user runs them: exit codes, JSON shape, messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.paths import REPO

STACK_KEYS = {
    "framework",
    "framework_version",
    "variant",
    "cuda",
    "cudnn",
    "nccl",
    "python",
    "min_driver",
    "index_url",
    "caveats",
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_resolve_550_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "resolve", "--driver", "550")
    assert code == 0, err
    assert out.startswith("driver R550 (PB, EOL 2025-04) runs CUDA <= 12.4 natively")
    assert "Compatible stacks" in out and "Rejected (" in out
    assert "needs driver >= 560.28.03 (CUDA 12.6), you have R550" in out
    assert "pip install 'torch==" in out


def test_resolve_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550.54.15", "--json")
    assert code == 0
    document = json.loads(out)
    assert set(document) >= {"stacks", "rejected"}
    assert [s["framework"] for s in document["stacks"]] == ["torch", "tensorflow", "jax"]
    for stack in document["stacks"]:
        assert set(stack) >= STACK_KEYS
        assert stack["cuda"].count(".") == 1
        assert isinstance(stack["caveats"], list)
    assert document["rejected"]
    for rejection in document["rejected"]:
        assert set(rejection) >= {"candidate", "reason"}
        assert rejection["reason"]


def test_exit_3_with_closest_misses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "535", "--framework", "tensorflow==2.16.*")
    assert code == 3
    assert "No compatible stack." in out
    assert "--compat minor would allow tensorflow 2.16.2 [cuda12.3] (CUDA 12.3)" in out
    code, out, _ = run_cli(
        capsys, "resolve", "--driver", "535", "--framework", "tensorflow==2.16.*", "--json"
    )
    assert code == 3
    document = json.loads(out)
    assert document["stacks"] == []
    assert document["closest"][0]["relax"] == ["--compat minor"]


def test_exit_3_when_gpu_outlives_driver(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "resolve", "--driver", "550", "--gpu", "K80")
    assert code == 3
    assert "R470" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--driver", "five-fifty"], "--driver"),
        (["--driver", "550", "--gpu", "H1000"], "did you mean"),
        (["--driver", "550", "--framework", "pytroch"], "did you mean"),
        (["--driver", "550", "--framework", "torch 2.5"], "torch==2.5"),
        (["--driver", "550", "--python", "three"], "--python"),
        (["--driver", "550", "--cuda", "twelve"], "--cuda"),
    ],
)
def test_bad_input_exits_2_with_a_fix(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, out, err = run_cli(capsys, "resolve", *args)
    assert code == 2
    assert out == ""
    assert err.startswith("error: ") and "fix: " in err and needle in err


def test_argparse_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["resolve", "--driver"])
    assert info.value.code == 2
    assert "--driver" in capsys.readouterr().err


def test_matrix_check_and_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "matrix", "check")
    assert code == 0 and out.startswith("matrix OK:")
    code, out, _ = run_cli(capsys, "matrix", "gpus")
    assert code == 0 and "H100" in out


def test_broken_matrix_names_file_row_and_key(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    drivers = matrix_copy / "drivers.toml"
    drivers.write_text(drivers.read_text().replace('min_driver = "550.54.14"', 'min_drivr = "550.54.14"', 1))
    code, _, err = run_cli(capsys, "resolve", "--driver", "550", "--matrix", str(matrix_copy))
    assert code == 2
    assert "drivers.toml: [[cuda]]" in err and "'min_drivr'" in err
    assert "did you mean 'min_driver'" in err
    assert "Traceback" not in err


def test_resolve_imports_no_docker_requests_or_jinja2() -> None:
    code = (
        "import sys; from envbuild.cli.app import main; main(['resolve','--driver','550','--json']);"
        "sys.stderr.write(repr(sorted(m for m in ('docker','requests','jinja2') "
        "if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ},
        check=False,
    )
    assert done.returncode == 0
    assert done.stderr.strip() == "[]"


def test_console_script_runs_without_traceback_on_bad_input() -> None:
    exe = Path(sys.executable).with_name("envbuild")
    done = subprocess.run([str(exe), "resolve", "--driver", "x"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
