"""GPU names (issue 34 item 2): one normaliser for every name a user types or nvidia-smi prints.

The fixture (tests/fixtures/gpu-names/nvidia-smi-names.toml) holds names copied from real nvidia-smi
output in public threads, each with its source and the row it must find.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild.errors import UsageError
from envbuild.matrix.check import check_matrix
from envbuild.matrix.gpunames import loose_key, model_number, name_key, similar_names
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Gpu, Matrix, find_gpu, gpu_index
from envbuild.resolve.query import build_query
from tests.helpers.paths import FIXTURES

CAPTURED = toml.loads((FIXTURES / "gpu-names" / "nvidia-smi-names.toml").read_text())["name"]


def _id(entry: dict) -> str:
    return entry["smi"]


def _row(matrix: Matrix, name: str) -> Gpu | None:
    """The row named `name` (its own name, compared as a key: the catalogue may spell the brand)."""
    return next((g for g in matrix.gpus if name_key(g.name) == name_key(name)), None)


def test_the_fixture_has_real_names_from_many_sources() -> None:
    assert len(CAPTURED) >= 30
    assert all(e["source"].startswith("https://github.com/") and e["how"] for e in CAPTURED)
    assert len({e["smi"] for e in CAPTURED}) == len(CAPTURED)


@pytest.mark.parametrize("entry", CAPTURED, ids=_id)
def test_captured_names_find_their_row(matrix: Matrix, entry: dict) -> None:
    found = find_gpu(matrix, entry["smi"])
    if "not_row" in entry:
        assert found is None or name_key(found.name) != name_key(entry["not_row"])
        return
    assert found is not None, f"{entry['smi']!r} finds no row"
    # a notebook part may have its own row or be its desktop namesake's (the normaliser's soft words)
    assert found.name in (entry.get("rows") or [entry["row"]])


def test_every_name_and_alias_finds_its_own_row(matrix: Matrix) -> None:
    index = gpu_index(matrix)
    for gpu in matrix.gpus:
        for label in (gpu.name, *gpu.aliases):
            assert find_gpu(matrix, label, index) is gpu, (gpu.name, label)
    assert not [e for e in check_matrix(matrix) if "normalises" in e]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("NVIDIA GeForce RTX 3060", "rtx3060"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 NVL", "h100"),
        ("NVIDIA RTX 4000 Ada Generation", "rtx4000ada"),
        ("Tesla T4", "t4"),
        ("Quadro RTX 8000", "rtx8000"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("TITAN X (Pascal)", "titanxpascal"),
        ("NVIDIA TITAN RTX", "titanrtx"),
        ("NVIDIA GH200 144G HBM3e", "gh200"),
        ("A100 16 GB", "a100"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "a100"),
        ("GeForce RTX 3080 GDDR6X", "rtx3080"),
        ("GB200 NVL72", "gb200"),
    ],
)
def test_what_the_key_drops(text: str, key: str) -> None:
    assert name_key(text) == key


@pytest.mark.parametrize(
    "names",
    [
        ("RTX 6000", "RTX 6000 Ada Generation", "RTX PRO 6000 Blackwell", "RTX A6000", "RTX 6000D"),
        ("H100", "H1000", "GH100"),
        ("A10", "A100", "A10G", "A10M"),
        ("RTX 3080", "RTX 3080 Ti", "RTX 3080 Super"),
        ("TITAN X (Pascal)", "GeForce GTX TITAN X", "TITAN Xp"),
    ],
)
def test_look_alikes_stay_apart(names: tuple[str, ...]) -> None:
    assert len({name_key(n) for n in names}) == len(names)


def test_soft_words_only_when_no_row_keeps_them(matrix: Matrix) -> None:
    assert loose_key("NVIDIA GeForce RTX 4090 Laptop GPU") == "rtx4090"
    assert loose_key("NVIDIA GeForce GTX 1650 with Max-Q Design") == "gtx1650"
    assert loose_key("NVIDIA RTX 4090") is None
    desktop = find_gpu(matrix, "RTX 4090")
    assert find_gpu(matrix, "NVIDIA GeForce RTX 4090 Laptop GPU") is desktop
    laptop = desktop.replace(name="RTX 4090 Laptop GPU", aliases=())
    with_laptop = matrix.replace(gpus=(*matrix.gpus, laptop))
    assert find_gpu(with_laptop, "NVIDIA GeForce RTX 4090 Laptop GPU") is laptop
    assert find_gpu(with_laptop, "NVIDIA GeForce RTX 4090") is desktop


def test_no_prefix_match_gives_a_longer_name_a_shorter_row(matrix: Matrix) -> None:
    """Before issue 34, "RTX 3080 Ti" took the RTX 3080 row and "H100 ..." anything starting H100.
    Names no product has, so the catalogue's growth cannot make them known."""
    assert find_gpu(matrix, "RTX 3080 Hyper") is None
    assert find_gpu(matrix, "RTX 3080") is not None
    assert find_gpu(matrix, "RTX 3080 Ti") is not find_gpu(matrix, "RTX 3080")
    assert find_gpu(matrix, "H1000") is None


def test_model_numbers() -> None:
    assert model_number("GTX 1080 Ti") == model_number("NVIDIA GeForce GTX 1080 Ti")
    parsed = model_number("RTX A5000")
    assert (parsed.family, parsed.number, parsed.suffix) == ("rtxa", 5000, "")
    assert model_number("Jetson Thor") is None


CATALOGUE = [
    "GTX 1080",
    "GTX 1070 Ti",
    "GTX 1070",
    "GTX 980",
    "RTX 3080",
    "RTX 4080",
    "RTX 5080",
    "RTX 3090",
    "H100",
    "H200",
    "A100",
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GTX 1080 Ti", ["GTX 1080", "GTX 1070 Ti", "GTX 1070"]),
        ("RTX 3060", ["RTX 3080", "RTX 3090"]),
        ("H1000", ["H100"]),
        ("A800", ["A100"]),
    ],
)
def test_suggestions_follow_series_and_number(text: str, expected: list[str]) -> None:
    assert similar_names(text, CATALOGUE) == expected


def suggested(fix: str) -> list[str]:
    """The names after "did you mean", empty when the fix offers none."""
    if not fix.startswith("did you mean "):
        return []
    return fix[len("did you mean ") : fix.index("?")].split(", ")


def test_a_pascal_card_is_never_offered_rtx_x080(matrix: Matrix) -> None:
    """Issue 34: the character match offered "RTX 5080, RTX 4080, RTX 3080" for a GTX 1080 Ti. A name
    no catalogue will hold (GTX 1085 Ti) keeps this true however many rows land."""
    with pytest.raises(UsageError) as info:
        build_query(matrix, driver="550", gpus=["GTX 1085 Ti"])
    fix = info.value.fix or ""
    assert all(name.startswith("GTX 10") for name in suggested(fix)), fix
    assert "compute_cap" in fix and "8.6 or sm_86" in fix
    assert "gpus.toml" in fix and "matrix check" in fix and "--matrix DIR" in fix


def test_an_unknown_name_suggests_its_neighbours(matrix: Matrix) -> None:
    with pytest.raises(UsageError) as info:
        build_query(matrix, driver="550", gpus=["RTX 3075"])
    assert info.value.message == "--gpu 'RTX 3075' is not a GPU envbuild knows"
    close = suggested(info.value.fix or "")
    assert close and len(close) <= 3
    assert all(name_key(name).startswith("rtx3") for name in close), close
    assert "RTX 3080" in close or "RTX 3070" in close


def test_matrix_check_names_an_alias_that_reaches_another_row(matrix_copy: Path) -> None:
    gpus = matrix_copy / "gpus.toml"
    planted = 'aliases = ["nvidia a30", "A100 80GB PCIe", "NVIDIA"]'
    gpus.write_text(gpus.read_text().replace('aliases = ["nvidia a30"]', planted))
    errors = check_matrix(load_matrix(matrix_copy))
    assert any(
        "gpus.toml: A30: alias 'A100 80GB PCIe' normalises to 'a100', which reaches 'A100' instead" in e
        and "fix:" in e
        for e in errors
    ), errors
    assert any("gpus.toml: A30: alias 'NVIDIA' normalises to nothing" in e for e in errors), errors


# --- envbuild matrix gpus --------------------------------------------------------------------


def gpus_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from envbuild.cli.app import main

    code = main(["matrix", "gpus", *args])
    out, err = capsys.readouterr()
    return code, out, err


def listed(out: str) -> list[str]:
    """The row names of the text listing (`8.6   RTX 3090  (also: ...)`)."""
    return [line[6:].split("  (also:")[0] for line in out.splitlines()]


@pytest.mark.parametrize("cc", ["8.6", "sm_86", "compute_86"])
def test_matrix_gpus_by_capability(capsys: pytest.CaptureFixture[str], matrix: Matrix, cc: str) -> None:
    code, out, _ = gpus_cli(capsys, "--cc", cc)
    assert code == 0
    assert listed(out) == sorted(g.name for g in matrix.gpus if g.cc == (8, 6))
    assert "RTX 3090" in listed(out) and "A100" not in listed(out)


@pytest.mark.parametrize(
    ("word", "rows"),
    [
        ("3090", ["RTX 3090"]),
        ("rtx a", ["RTX A6000"]),
        ("NVIDIA A100-SXM4-80GB", ["A100"]),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", ["RTX 4090"]),
        ("h200", ["GH200", "H200"]),
    ],
)
def test_matrix_gpus_by_word(
    capsys: pytest.CaptureFixture[str], matrix: Matrix, word: str, rows: list[str]
) -> None:
    """The rows named are listed, and every row listed is one the word names or whose name or an
    alias contains it (the catalogue grows: "3090" may also list an RTX 3090 Ti)."""
    code, out, _ = gpus_cli(capsys, word)
    assert code == 0
    assert set(rows) <= set(listed(out))
    named = find_gpu(matrix, word)
    for name in listed(out):
        gpu = _row(matrix, name)
        assert gpu is named or any(name_key(word) in name_key(x) for x in (gpu.name, *gpu.aliases)), name
    assert "T4" not in listed(out)


def test_matrix_gpus_word_and_capability_together(capsys: pytest.CaptureFixture[str], matrix: Matrix) -> None:
    code, out, _ = gpus_cli(capsys, "rtx", "--cc", "8.9")
    assert code == 0
    assert {"RTX 4080", "RTX 4090", "RTX 6000 Ada"} <= set(listed(out))
    assert all(_row(matrix, name).cc == (8, 9) for name in listed(out))
    assert "L40S" not in listed(out) and "RTX 3090" not in listed(out)


def test_matrix_gpus_json_is_one_shape_for_every_row(
    capsys: pytest.CaptureFixture[str], matrix: Matrix
) -> None:
    import json

    code, out, _ = gpus_cli(capsys, "--json")
    assert code == 0
    rows = json.loads(out)["gpus"]
    assert len(rows) == len(matrix.gpus)
    keys = [
        "name",
        "aliases",
        "compute_capability",
        "architecture",
        "segment",
        "first_cuda",
        "min_driver_branch",
        "max_driver_branch",
        "bf16",
        "fp16",
        "memory_gb",
        "source",
    ]
    assert all(list(row) == keys for row in rows)
    k80 = next(r for r in rows if r["name"] == "Tesla K80")
    assert (k80["compute_capability"], k80["max_driver_branch"], k80["bf16"]) == ("3.7", 470, False)
    assert k80["source"].startswith("https://")
    code, out, _ = gpus_cli(capsys, "--cc", "9.0", "--json")
    assert {r["name"] for r in json.loads(out)["gpus"]} == {g.name for g in matrix.gpus if g.cc == (9, 0)}
    assert {"H100", "H200", "GH200"} <= {r["name"] for r in json.loads(out)["gpus"]}


def test_matrix_gpus_without_a_match_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gpus_cli(capsys, "zz9999")
    assert (code, out) == (1, "")
    assert "no GPU in the matrix matches 'zz9999'" in err


@pytest.mark.parametrize("bad", ["eight", "8", "sm", "8.x"])
def test_matrix_gpus_bad_capability_exits_2(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    code, out, err = gpus_cli(capsys, "--cc", bad)
    assert (code, out) == (2, "")
    assert f"error: --cc {bad!r} is not a compute capability" in err
    assert "8.6" in err and "sm_86" in err and "Traceback" not in err


# --- issue 34 item 9: the name keys live in the matrix cache ------------------------------------


def test_the_matrix_cache_holds_the_name_keys(
    matrix_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached load keys no row's name: the keys come from the entry, and make the same index."""
    import json

    from envbuild.matrix import model

    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(cache))
    fresh = load_matrix(matrix_copy)
    (entry,) = cache.glob("matrix-*.json")
    lines = json.loads(entry.read_text())["files"]["gpus.toml"]["keys"].split("\n")
    assert len(lines) == len(fresh.gpus)
    a100 = next(i for i, g in enumerate(fresh.gpus) if g.name == "A100")
    assert lines[a100].split()[0] == "a100" and "a100sxm4" not in lines[a100]  # keys, not spellings
    computed = {k: g.name for k, g in gpu_index(fresh).items()}

    cached = load_matrix(matrix_copy)  # a hit: no name is normalised to build the index

    def refuse(_text: str) -> str:
        raise AssertionError("a cached load normalised a row's name")

    monkeypatch.setattr(model, "gpu_keys", refuse)
    assert {k: g.name for k, g in gpu_index(cached).items()} == computed
    assert find_gpu(cached, "NVIDIA A100-SXM4-80GB").name == "A100"


def test_damaged_cached_keys_cost_time_not_a_wrong_row(
    matrix_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(cache))
    load_matrix(matrix_copy)
    (entry,) = cache.glob("matrix-*.json")
    document = json.loads(entry.read_text())
    document["files"]["gpus.toml"]["keys"] = "a100 h100\nt4"  # two lines for 34 rows
    entry.write_text(json.dumps(document))
    damaged = load_matrix(matrix_copy)
    assert find_gpu(damaged, "NVIDIA A100-SXM4-80GB").name == "A100"
    assert find_gpu(damaged, "H100").name == "H100"
