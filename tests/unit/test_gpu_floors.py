"""GPU driver floors and real capabilities (issue 15, items 1 and 4), against the bundled matrix.

Every row of the tables comes from NVIDIA's architecture matrix and CUDA GPUs pages (gpus.toml
first_cuda) and the GA minimum drivers of CUDA's release notes (drivers.toml): Blackwell 10.0/12.0
needs CUDA 12.8 (570.26, R570); 10.3/12.1 needs 12.9 (575.51.03, R575); Hopper and Ada need 11.8
(520.61.05, R520); Ampere 8.0 needs 11.0 (450.51.05, R450), 8.6 needs 11.1 (455.23, R455); Thor
(11.0) needs 13.0 (580.65.06, R580). Turing, Volta, Pascal and Kepler came before CUDA 11.0, the
oldest release the matrix knows, so no driver the matrix knows is too old for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.resolve.query import build_query
from envbuild.resolve.solver import Resolution, resolve
from tests.helpers.matrixedit import check, edit
from tests.helpers.nvsmi import by_name, doctor

B200_ON_535 = (
    "driver 535.104.05 does not support B200 (Blackwell, compute capability 10.0: needs R570 or later, "
    "CUDA 12.8)"
)


def run(matrix: Matrix, **kwargs) -> Resolution:
    return resolve(matrix, build_query(matrix, **kwargs))


def floor_problems(result: Resolution) -> list[str]:
    return [p for p in result.problems if "does not support" in p]


# GPU, driver, first branch it needs (None: the driver is new enough)
TABLE = [
    ("B200", "R535", 570),
    ("B200", "535.104.05", 570),
    ("B200", "R550", 570),
    ("B200", "R565", 570),
    ("B200", "570.26", None),
    ("B200", "R570", None),
    ("GB200", "R565", 570),
    ("GB200", "R570", None),
    ("RTX 5090", "R550", 570),
    ("RTX 5090", "560.35.03", 570),
    ("RTX 5090", "R570", None),
    ("RTX PRO 6000 Blackwell", "R565", 570),
    ("RTX PRO 6000 Blackwell", "R570", None),
    ("B300", "R570", 575),
    ("B300", "R575", None),
    ("GB300", "R570", 575),
    ("GB300", "R580", None),
    ("GB10", "570.172.08", 575),
    ("GB10", "R575", None),
    ("H100", "R470", 520),
    ("H100", "R515", 520),
    ("H100", "R520", None),
    ("H200", "470.256.02", 520),
    ("GH200", "R520", None),
    ("L4", "R515", 520),
    ("L4", "520.61.05", None),
    ("RTX 4090", "R515", 520),
    ("A100", "R440", 450),
    ("A100", "R450", None),
    ("A10", "R450", 455),
    ("A10", "R455", None),
    ("RTX 3090", "R450", 455),
    ("T4", "R418", None),
    ("Tesla V100", "R418", None),
    ("Tesla P100", "R418", None),
    ("Tesla K80", "R418", None),
]


@pytest.mark.parametrize("compat", ["native", "minor"])
@pytest.mark.parametrize(("gpu", "driver", "needs"), TABLE)
def test_gpu_driver_floor_table(
    matrix: Matrix, gpu: str, driver: str, needs: int | None, compat: str
) -> None:
    result = run(matrix, driver=driver, gpus=[gpu], compat=compat)
    problems = floor_problems(result)
    if needs is None:
        assert problems == []
    else:
        assert result.stacks == ()  # minor-version compatibility adds no GPUs
        assert len(problems) == 1
        assert f"needs R{needs} or later" in problems[0]


@pytest.mark.parametrize(("gpu", "branch"), [("Jetson Thor", 580), ("Jetson AGX Orin", 470)])
def test_jetson_floors_stay_in_the_matrix_though_resolve_refuses_jetson(
    matrix: Matrix, gpu: str, branch: int
) -> None:
    """resolve refuses integrated GPUs (JetPack/L4T), so their floors are checked on the rows."""
    from envbuild.matrix.model import find_gpu
    from envbuild.matrix.support import first_driver

    row = find_gpu(matrix, gpu)
    assert row is not None and row.integrated
    floor = first_driver(matrix, row)
    assert floor is not None and floor.branch == branch


def test_the_issue_examples_exactly(matrix: Matrix) -> None:
    b200 = run(matrix, driver="535.104.05", gpus=["B200"])
    assert (b200.stacks, b200.problems) == ((), (B200_ON_535,))
    rtx = run(matrix, driver="550", gpus=["RTX 5090"], compat="minor")
    assert rtx.stacks == ()
    assert rtx.problems == (
        "driver R550 does not support RTX 5090 (Blackwell, compute capability 12.0: needs R570 or "
        "later, CUDA 12.8)",
    )
    h100 = run(matrix, driver="470", gpus=["H100"])
    assert h100.stacks == ()
    assert h100.problems == (
        "driver R470 does not support H100 (Hopper, compute capability 9.0: needs R520 or later, CUDA 11.8)",
    )
    # no "closest misses" that a driver the GPU cannot use would allow
    assert (b200.closest, rtx.closest, h100.closest) == ((), (), ())


def test_the_cli_says_so_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "535.104.05", "--gpu", "B200"]) == 3
    out = capsys.readouterr().out
    assert f"problem: {B200_ON_535}" in out
    assert "Compatible stacks" not in out and "Closest misses" not in out
    assert main(["resolve", "--driver", "535.104.05", "--gpu", "B200", "--json"]) == 3
    document = json.loads(capsys.readouterr().out)
    assert document["problems"] == [B200_ON_535]
    assert document["stacks"] == [] and document["closest"] == []


def test_at_the_floor_blackwell_resolves(matrix: Matrix) -> None:
    result = run(matrix, driver="570", gpus=["B200"], frameworks=["torch"])
    assert result.problems == ()
    assert result.stacks and result.stacks[0].cuda >= (12, 8)


SPEC = """\
[stack]
driver = "535.104.05"
framework = "torch"
gpus = [{gpus}]
strategy = "wheels"
os = "ubuntu22.04"

[image]
repository = "registry.example.com:5000/team/train"
"""


def test_a_spec_goes_through_the_same_rules(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(SPEC.format(gpus='"B200"'))
    assert main(["render", "-f", str(spec), "--stdout"]) == 3
    assert B200_ON_535 in capsys.readouterr().err
    spec.write_text(SPEC.format(gpus='"sm_999"'))
    assert main(["render", "-f", str(spec), "--stdout"]) == 2
    assert "which no GPU in the matrix has" in capsys.readouterr().err


# --- --gpu takes names, aliases and the capabilities of GPUs in the matrix


@pytest.mark.parametrize(
    ("text", "cc", "note"),
    [
        ("9.0", (9, 0), None),
        ("sm_90", (9, 0), None),
        ("sm90", (9, 0), None),
        ("SM_90", (9, 0), None),
        ("sm_120", (12, 0), None),
        ("12.1", (12, 1), None),
        (
            "compute_90",
            (9, 0),
            "compute_90 is judged as compute capability 9.0 (a PTX virtual architecture stands for the "
            "GPUs that have that capability)",
        ),
        (
            "sm_90a",
            (9, 0),
            "sm_90a is judged as compute capability 9.0 (arch-specific features are not part of the matrix)",
        ),
        (
            "9.0a",
            (9, 0),
            "9.0a is judged as compute capability 9.0 (arch-specific features are not part of the matrix)",
        ),
        (
            "sm_100f",
            (10, 0),
            "sm_100f is judged as compute capability 10.0 (family-specific features are not part of the "
            "matrix)",
        ),
    ],
)
def test_capability_spellings(matrix: Matrix, text: str, cc: tuple[int, int], note: str | None) -> None:
    query = build_query(matrix, driver="580", gpus=[text])
    assert query.gpus[0].cc == cc
    assert query.notes == ((note,) if note else ())


@pytest.mark.parametrize(
    ("text", "close"),
    [
        ("sm_999", ["12.1", "12.0"]),
        ("13.0", ["12.1", "12.0"]),
        ("sm_130", ["12.1", "12.0"]),
        ("compute_999", ["12.1", "12.0"]),
        ("sm_88", ["8.9", "8.7"]),
        ("9.9", ["9.0"]),
    ],
)
def test_a_capability_no_gpu_has_is_a_usage_error(matrix: Matrix, text: str, close: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        build_query(matrix, driver="580", gpus=[text])
    assert info.value.exit_code == 2
    assert info.value.message.startswith(f"--gpu {text!r} is compute capability ")
    assert "which no GPU in the matrix has" in info.value.message
    fix = info.value.fix or ""
    assert fix.startswith(f"did you mean {close[0]} (")
    for cc in close:
        assert f"{cc} (" in fix
    assert (
        "known capabilities: 3.5, 3.7, 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, "
        "9.0, 10.0, 10.3, 11.0, 12.0, 12.1;" in fix
    )
    assert "--matrix" in fix and "gpus.toml" in fix


def test_unknown_capability_exits_2_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "580", "--gpu", "sm_999"]) == 2
    err = capsys.readouterr().err
    assert "--gpu 'sm_999' is compute capability 99.9, which no GPU in the matrix has" in err
    assert "Traceback" not in err and "internal error" not in err


def test_capability_note_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    note = "sm_90a is judged as compute capability 9.0 (arch-specific features are not part of the matrix)"
    assert main(["resolve", "--driver", "580", "--gpu", "sm_90a"]) == 0
    assert f"note: {note}" in capsys.readouterr().out
    assert main(["resolve", "--driver", "580", "--gpu", "sm_90a", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [note]


@pytest.mark.parametrize(
    ("text", "driver", "problem"),
    [
        (
            "sm_100",
            "535.104.05",
            "driver 535.104.05 does not support sm_100 (Blackwell, compute capability 10.0: needs R570 or "
            "later, CUDA 12.8)",
        ),
        (
            "10.3",
            "R570",
            "driver R570 does not support sm_103 (Blackwell, compute capability 10.3: needs R575 or later, "
            "CUDA 12.9)",
        ),
        (
            "8.6",
            "R450",
            "driver R450 does not support sm_86 (Ampere, compute capability 8.6: needs R455 or later, "
            "CUDA 11.1)",
        ),
        (
            "sm_37",
            "R550",
            "sm_37 is supported only up to driver branch R470; driver R550 cannot drive it (install an "
            "R470 driver)",
        ),
    ],
)
def test_a_capability_takes_the_floors_of_its_gpus(
    matrix: Matrix, text: str, driver: str, problem: str
) -> None:
    for compat in ("native", "minor"):
        result = run(matrix, driver=driver, gpus=[text], compat=compat)
        assert (result.stacks, result.problems) == ((), (problem,))


def test_a_capability_stands_for_the_gpus_that_have_it(matrix: Matrix) -> None:
    from envbuild.matrix.support import capability_gpu

    for gpu in matrix.gpus:
        same = [g for g in matrix.gpus if g.cc == gpu.cc]
        stand_in = capability_gpu(matrix, gpu.cc)
        assert stand_in is not None
        assert stand_in.first_cuda == min(g.first_cuda for g in same)
        lasts = [g.max_driver_branch for g in same]
        assert stand_in.max_driver_branch == (None if None in lasts else max(lasts))
        assert stand_in.architecture == gpu.architecture
    assert capability_gpu(matrix, (13, 0)) is None


# --- matrix check


B200_ROW = 'name = "B200"\naliases = ["nvidia b200", "hgx b200", "dgx b200"]\ncompute_capability = "10.0"\n'


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('first_cuda = "12.8"', 'first_cuda = "12.8.0"', "first_cuda = '12.8.0': expected an X.Y version"),
        ('first_cuda = "12.8"', 'first_cuda = "twelve"', "first_cuda = 'twelve': expected an X.Y version"),
        ('first_cuda = "12.8"\n', "", "missing required key 'first_cuda'"),
        ('first_cuda = "12.8"', 'first_cuda = "12.6"', "GB200: first_cuda 12.8 differs from B200's 12.6"),
        ('first_cuda = "12.8"', 'first_cuda = "14.2"', "B200: first_cuda 14.2 is not a CUDA release"),
    ],
)
def test_matrix_check_validates_first_cuda(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path, old: str, new: str, expected: str
) -> None:
    gpus = matrix_copy / "gpus.toml"
    edit(
        gpus, B200_ROW + 'architecture = "Blackwell"\n' + old, B200_ROW + 'architecture = "Blackwell"\n' + new
    )
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert expected in out, out


def test_matrix_check_wants_first_cuda_before_the_last(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path
) -> None:
    gpus = matrix_copy / "gpus.toml"
    text = gpus.read_text()
    k80 = text.index('name = "Tesla K80"')
    gpus.write_text(text[:k80] + text[k80:].replace('first_cuda = "6.0"', 'first_cuda = "12.0"', 1))
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "Tesla K80: first_cuda 12.0 is newer than CUDA 11.4, the newest of its last branch R470" in out


# --- doctor: the same rule for the GPUs nvidia-smi reports

B200_ROW_CSV = (
    "{}, NVIDIA B200, GPU-{}, 550.127.05, 10.0, 1, 183359, 0, 31, 140.00, 1000.00, 0x0000000000000001\n"
)


def test_doctor_fails_a_b200_on_a_550_driver(capsys: pytest.CaptureFixture[str], fake_smi) -> None:
    # the banner is a real R550 capture; the query answer puts B200s on its driver (a host that
    # cannot work, which is the point)
    fake_smi("banner_550_h100_8gpu.txt", query_csv=B200_ROW_CSV.format(0, "a") + B200_ROW_CSV.format(1, "b"))
    code, report = doctor(capsys)
    assert code == 1
    check = by_name(report)["driver vs GPUs"]
    assert check["status"] == "fail"
    assert check["evidence"] == (
        "GPU 0, 1 (NVIDIA B200): driver 550.127.05 does not support B200 (Blackwell, compute capability "
        "10.0: needs R570 or later, CUDA 12.8)"
    )
    assert check["fix"] == "install an R570 or later driver"


def test_doctor_judges_an_unnamed_gpu_by_its_capability(capsys: pytest.CaptureFixture[str], fake_smi) -> None:
    row = (
        "0, NVIDIA Future Part, GPU-a, 550.127.05, 12.0, 1, 32000, 0, 31, 40.00, 400.00, 0x0000000000000001\n"
    )
    fake_smi("banner_550_h100_8gpu.txt", query_csv=row)
    _, report = doctor(capsys)
    check = by_name(report)["driver vs GPUs"]
    assert check["status"] == "fail"
    assert (
        "does not support sm_120 (Blackwell, compute capability 12.0: needs R570 or later"
        in check["evidence"]
    )


def test_doctor_passes_h100_on_550(capsys: pytest.CaptureFixture[str], fake_smi) -> None:
    fake_smi("banner_550_h100_8gpu.txt")
    _, report = doctor(capsys)
    check = by_name(report)["driver vs GPUs"]
    assert check["status"] == "ok"
    assert check["evidence"] == "driver 550.127.05 drives NVIDIA H100 80GB HBM3 (H100: R520 or later)"
