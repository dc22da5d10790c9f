"""The GPU catalogue of issue 34 (items 1 and 3), against the bundled matrix.

The tables come from the sources gpus.toml cites: compute capabilities from NVIDIA's CUDA GPUs pages
(or the copies a row names), first driver branches from the GA minimum drivers in drivers.toml
(Ampere 8.6: CUDA 11.1, R455; Ada and Hopper: 11.8, R520; Blackwell 12.0: 12.8, R570), and last
branches from NVIDIA's data-center architecture matrix (Kepler R470; Maxwell, Pascal, Volta R580).
Names are spelled as today's tokeniser already matches them (it drops a leading NVIDIA / GeForce /
Tesla / Quadro and takes an nvidia-smi string by its first words); the normaliser that also drops
memory sizes and form factors is tested with its own fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.matrix.model import Gpu, Matrix, find_gpu
from envbuild.resolve.query import build_query, parse_gpu
from envbuild.resolve.solver import Resolution, Stack, resolve

ARCHITECTURES = (
    "Kepler",
    "Maxwell",
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada Lovelace",
    "Hopper",
    "Blackwell",
)
SEGMENTS = ("data-center", "workstation", "geforce", "jetson")
LAST_BRANCH = {"Kepler": 470, "Maxwell": 580, "Pascal": 580, "Volta": 580}


def run(matrix: Matrix, **kwargs) -> Resolution:
    return resolve(matrix, build_query(matrix, **kwargs))


def covers(stack: Stack, cc: tuple[int, int]) -> bool:
    """Whether the build has kernels (SASS or PTX) for the capability: what "gets a stack" means."""
    return stack.variant.arch.covers(cc) is not None


def gpu(matrix: Matrix, name: str) -> Gpu:
    row = find_gpu(matrix, name)
    assert row is not None, f"{name!r} is not in gpus.toml"
    return row


# --- item 1: the GPUs labs own, each on drivers its sources name

# GPU, driver, the capability it must have, the first branch it needs (None: the driver drives it)
TABLE = [
    ("RTX 3060", "535.104.05", (8, 6), None),
    ("RTX 3060", "R450", (8, 6), 455),
    ("GTX 1080 Ti", "550", (6, 1), None),
    ("GTX 1080 Ti", "580", (6, 1), None),
    ("NVIDIA GeForce RTX 4070", "535", (8, 9), None),
    ("RTX 4070", "R515", (8, 9), 520),
    ("RTX 2080 Ti", "535", (7, 5), None),
    ("Quadro RTX 8000", "535", (7, 5), None),
    ("RTX A5000", "535", (8, 6), None),
    ("RTX A5000", "R450", (8, 6), 455),
    ("Tesla M60", "535", (5, 2), None),
    ("Tesla P4", "580", (6, 1), None),
    ("TITAN V", "550", (7, 0), None),
    ("H800", "535", (9, 0), None),
    ("H800", "R515", (9, 0), 520),
    ("A800", "535", (8, 0), None),
    ("H20", "550", (9, 0), None),
    ("L20", "535", (8, 9), None),
    ("L20", "R515", (8, 9), 520),
    ("RTX 4000 Ada Generation", "535", (8, 9), None),
    ("RTX 5070 Ti", "R565", (12, 0), 570),
    ("RTX 5070 Ti", "570", (12, 0), None),
    ("RTX PRO 4500 Blackwell", "575", (12, 0), None),
]


@pytest.mark.parametrize(("name", "driver", "cc", "needs"), TABLE)
def test_consumer_and_workstation_gpus_by_driver(
    matrix: Matrix, name: str, driver: str, cc: tuple[int, int], needs: int | None
) -> None:
    assert gpu(matrix, name).cc == cc
    result = run(matrix, driver=driver, gpus=[name])
    if needs is None:
        assert result.problems == ()
        assert result.stacks, f"{name} on {driver}: no stack"
        assert all(covers(stack, cc) for stack in result.stacks)
    else:
        assert result.stacks == ()
        assert len(result.problems) == 1
        assert f"needs R{needs} or later" in result.problems[0]


def test_a_pascal_geforce_gets_torch_with_its_kernels_and_newer_builds_are_rejected_for_it(
    matrix: Matrix,
) -> None:
    """uv's driver-only pick gives a GTX 1080 Ti wheels without sm_61 (astral-sh/uv#14742)."""
    result = run(matrix, driver="550", gpus=["GTX 1080 Ti"], frameworks=["torch"])
    assert result.stacks and all(covers(stack, (6, 1)) for stack in result.stacks)
    kernels = [f.text for r in result.rejected for f in r.failures if f.kind == "gpu"]
    assert kernels, "no torch build without sm_61 was rejected: the kernel check did not run"
    assert all("GTX 1080 Ti (sm_61, compute capability 6.1)" in text for text in kernels)


def newer_than_r580(matrix: Matrix) -> list[int]:
    return sorted(branch for branch in matrix.branches if branch > 580)


@pytest.mark.parametrize("name", ["GTX 1080 Ti", "TITAN V", "Tesla P100", "Tesla M60", "Quadro GV100"])
def test_the_last_branch_rule_r580(matrix: Matrix, name: str) -> None:
    branches = newer_than_r580(matrix)
    assert branches, "drivers.toml knows no branch after R580"
    for branch in branches:
        result = run(matrix, driver=f"R{branch}", gpus=[name])
        assert result.stacks == (), f"{name} on R{branch}"
        assert len(result.problems) == 1
        assert (
            f"supported only up to driver branch R580; driver R{branch} cannot drive it" in result.problems[0]
        )
        assert "install an R580 driver" in result.problems[0]
    assert run(matrix, driver="R580", gpus=[name]).problems == ()


def test_the_last_branch_rule_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "590", "--gpu", "GTX 1080 Ti"]) == 3
    out = capsys.readouterr().out
    assert "GTX 1080 Ti is supported only up to driver branch R580" in out
    assert "Compatible stacks" not in out


@pytest.mark.parametrize("name", ["Tesla K40", "Tesla K20", "Quadro K6000", "GTX 780 Ti", "GTX TITAN Black"])
def test_kepler_ends_at_r470(matrix: Matrix, name: str) -> None:
    assert run(matrix, driver="R470", gpus=[name]).problems == ()
    problems = run(matrix, driver="R535", gpus=[name]).problems
    assert len(problems) == 1 and "supported only up to driver branch R470" in problems[0]


def test_a_host_with_an_rtx_3090_and_a_gtx_1080_ti_gets_stacks_for_both(matrix: Matrix) -> None:
    both = run(matrix, driver="580", gpus=["RTX 3090", "GTX 1080 Ti"], frameworks=["torch"])
    assert [g.name for g in both.query.gpus] == ["RTX 3090", "GTX 1080 Ti"]
    assert both.problems == () and both.stacks
    for stack in both.stacks:
        assert covers(stack, (8, 6)) and covers(stack, (6, 1))
    # the Pascal card is what rules builds out: the RTX 3090 alone may take one the pair cannot
    alone = run(matrix, driver="580", gpus=["RTX 3090"], frameworks=["torch"])
    pair = {(s.release.version, s.variant.name) for s in both.stacks}
    dropped = [s for s in alone.stacks if (s.release.version, s.variant.name) not in pair]
    assert dropped and not any(covers(s, (6, 1)) for s in dropped)
    # and one card past its last branch refuses the host
    after = run(matrix, driver="590", gpus=["RTX 3090", "GTX 1080 Ti"])
    assert after.stacks == () and len(after.problems) == 1 and "GTX 1080 Ti" in after.problems[0]


def test_the_host_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["resolve", "--driver", "580", "--gpu", "RTX 3090", "--gpu", "GTX 1080 Ti", "--framework", "torch"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "GPUs: RTX 3090 (8.6), GTX 1080 Ti (6.1)" in out
    assert "Compatible stacks" in out


# --- names nvidia-smi prints that share first words with an older card


@pytest.mark.parametrize(
    ("printed", "row", "cc"),
    [
        ("NVIDIA RTX 5000 Ada Generation", "RTX 5000 Ada Generation", (8, 9)),
        ("Quadro RTX 5000", "Quadro RTX 5000", (7, 5)),
        ("NVIDIA RTX 4000 SFF Ada Generation", "RTX 4000 SFF Ada Generation", (8, 9)),
        ("NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada Generation", (8, 9)),
        ("Quadro RTX 4000", "Quadro RTX 4000", (7, 5)),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", (8, 9)),
        ("Quadro RTX 6000", "Quadro RTX 6000", (7, 5)),
        ("NVIDIA TITAN X (Pascal)", "TITAN X", (6, 1)),
        ("GeForce GTX TITAN X", "GTX TITAN X", (5, 2)),
        ("NVIDIA TITAN Xp", "TITAN Xp", (6, 1)),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "RTX 3060", (8, 6)),
        ("NVIDIA GeForce RTX 3060 Ti", "RTX 3060 Ti", (8, 6)),
        ("NVIDIA GeForce RTX 4050 Laptop GPU", "RTX 4050", (8, 9)),
        ("NVIDIA GeForce GTX 1650 Ti", "GTX 1650 Ti", (7, 5)),
        ("Tesla K40m", "Tesla K40", (3, 5)),
        ("NVIDIA H20", "H20", (9, 0)),
        ("NVIDIA H200", "H200", (9, 0)),
        ("NVIDIA L20", "L20", (8, 9)),
    ],
)
def test_printed_names_find_their_own_row(
    matrix: Matrix, printed: str, row: str, cc: tuple[int, int]
) -> None:
    found = gpu(matrix, printed)
    assert (found.name, found.cc) == (row, cc)


# --- item 3: every capability of the catalogue as a number

CAPABILITIES = {
    (3, 5): "Kepler",
    (3, 7): "Kepler",
    (5, 0): "Maxwell",
    (5, 2): "Maxwell",
    (5, 3): "Maxwell",
    (6, 0): "Pascal",
    (6, 1): "Pascal",
    (6, 2): "Pascal",
    (7, 0): "Volta",
    (7, 2): "Volta",
    (7, 5): "Turing",
    (8, 0): "Ampere",
    (8, 6): "Ampere",
    (8, 7): "Ampere",
    (8, 9): "Ada Lovelace",
    (9, 0): "Hopper",
    (10, 0): "Blackwell",
    (10, 3): "Blackwell",
    (11, 0): "Blackwell",
    (12, 0): "Blackwell",
    (12, 1): "Blackwell",
}


@pytest.mark.parametrize("cc", sorted(CAPABILITIES), ids=lambda cc: f"{cc[0]}.{cc[1]}")
@pytest.mark.parametrize("spelling", ["{0}.{1}", "sm_{0}{1}", "SM{0}{1}", "compute_{0}{1}"])
def test_every_capability_is_accepted(matrix: Matrix, cc: tuple[int, int], spelling: str) -> None:
    stand_in = parse_gpu(spelling.format(*cc), matrix)
    assert stand_in.cc == cc
    assert stand_in.architecture == CAPABILITIES[cc]
    rows = [g for g in matrix.gpus if g.cc == cc]
    assert stand_in.first_cuda == min(g.first_cuda for g in rows)
    assert stand_in.integrated == all(g.integrated for g in rows)


@pytest.mark.parametrize("cc", sorted(CAPABILITIES), ids=lambda cc: f"{cc[0]}.{cc[1]}")
def test_a_capability_is_as_certain_as_its_best_sourced_row(matrix: Matrix, cc: tuple[int, int]) -> None:
    """8.9 has rows read first-hand (RTX 4090, L4) beside rows read from copies: a query by number
    must not carry a caveat its confirmed rows do not have; a capability only copies vouch for
    (6.1) keeps theirs. Its provenance names a few rows, not dozens."""
    rows = [g for g in matrix.gpus if g.cc == cc]
    stand_in = parse_gpu(f"sm_{cc[0]}{cc[1]}", matrix)
    if all(g.prov.confidence for g in rows):
        assert stand_in.prov.confidence in {g.prov.confidence for g in rows}
    else:
        assert stand_in.prov.confidence is None
    named = stand_in.prov.where.split("(", 1)[1]
    assert named.count(",") <= 4
    if len(rows) > 5:
        assert f"and {len(rows) - 4} more)" in stand_in.prov.where


def test_the_matrix_has_exactly_the_capabilities_of_the_issue(matrix: Matrix) -> None:
    assert {g.cc for g in matrix.gpus} == set(CAPABILITIES)


@pytest.mark.parametrize("text", ["6.1", "sm_52", "5.0"])
def test_pascal_and_maxwell_capabilities_resolve_on_the_command_line(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    assert main(["resolve", "--driver", "550", "--gpu", text]) == 0
    assert "Compatible stacks" in capsys.readouterr().out


# --- the catalogue itself


def test_every_architecture_and_segment_is_present(matrix: Matrix) -> None:
    assert {g.architecture for g in matrix.gpus} == set(ARCHITECTURES)
    assert {g.segment for g in matrix.gpus} == set(SEGMENTS)
    for architecture in ARCHITECTURES:
        segments = {g.segment for g in matrix.gpus if g.architecture == architecture}
        assert segments - {"jetson"}, f"{architecture}: only Jetson rows"


@pytest.mark.parametrize(
    "name",
    [
        "RTX 3060",
        "GTX 1080 Ti",
        "NVIDIA GeForce RTX 4070",
        "RTX 2080 Ti",
        "Quadro RTX 8000",
        "RTX A5000",
        "Tesla M60",
        "H800",
        "A800",
        "H20",
        "L20",
        "TITAN RTX",
        "GTX 1660 SUPER",
        "RTX 2080 SUPER",
        "RTX 4080 SUPER",
        "RTX 5060",
        "GTX 980 Ti",
        "Jetson AGX Xavier",
        "Jetson TX2",
        "Jetson Nano",
    ],
)
def test_the_issue_gpus_are_in_the_catalogue(matrix: Matrix, name: str) -> None:
    gpu(matrix, name)


def test_last_driver_branches_follow_the_architecture_matrix(matrix: Matrix) -> None:
    """Kepler ends at R470, Maxwell/Pascal/Volta at R580; later architectures have no last branch.
    Jetson rows carry none: JetPack/L4T drivers are not the data-center branches."""
    for row in matrix.gpus:
        expected = None if row.integrated else LAST_BRANCH.get(row.architecture)
        assert row.max_driver_branch == expected, row.name


def test_every_row_cites_a_primary_url_and_says_when_it_was_read_from_a_copy(matrix: Matrix) -> None:
    for row in matrix.gpus:
        assert row.prov.source.startswith("https://"), row.name
        note = row.prov.note or ""
        if "copy" in note or "captured in public logs" in note:
            assert row.prov.confidence in ("secondary", "disputed"), row.name


def test_data_center_rows_are_the_data_center_segment(matrix: Matrix) -> None:
    """data_center (forward-compat eligibility) is claimed only for NVIDIA data-center GPUs; the
    RTX PRO 6000 Blackwell Server Edition and GB10 keep false until their eligibility is read."""
    for row in matrix.gpus:
        if row.data_center:
            assert row.segment == "data-center", row.name
        elif row.segment == "data-center":
            pytest.fail(f"{row.name}: a data-center row without data_center = true")


# --- matrix check: the schema forces a source; one capability is one architecture


def check(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    code = main(["matrix", "check", "--matrix", str(root)])
    out, err = capsys.readouterr()
    return code, out + err


def edit_row(path: Path, name: str, old: str, new: str) -> None:
    text = path.read_text()
    start = text.index(f'\nname = "{name}"\n')
    end = text.find("\n[[gpu]]", start)
    end = len(text) if end < 0 else end
    row = text[start:end]
    assert old in row, f"fixture drift: {old!r} not in the {name} row"
    path.write_text(text[:start] + row.replace(old, new, 1) + text[end:])


def test_a_gpu_row_without_a_source_is_refused(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    edit_row(
        matrix_copy / "gpus.toml", "GTX 1080 Ti", 'source = "https://developer.nvidia.com/cuda-gpus"', ""
    )
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "gpus.toml" in out and "GTX 1080 Ti" in out and "missing required key 'source'" in out


def test_a_capability_with_two_architectures_is_refused(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path
) -> None:
    edit_row(matrix_copy / "gpus.toml", "GTX 1080 Ti", 'architecture = "Pascal"', 'architecture = "Volta"')
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "GTX 1080 Ti: architecture 'Volta' differs from" in out
    assert "one capability is one architecture" in out
