"""`envbuild matrix check`: broken data is caught with the file, the row and what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.matrixedit import check, edit
from tests.helpers.paths import MATRIX_DIR


def test_bundled_matrix_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(capsys, MATRIX_DIR)
    assert code == 0, out
    assert "matrix OK" in out


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        (
            "drivers.toml",
            'source = "https://docs.nvidia.com/cuda/archive/13.2.2/',
            'source = "Table 3 of docs.nvidia.com/cuda/archive/13.2.2/',
            "an http(s) URL",
        ),
        ("drivers.toml", 'min_driver = "550.54.14"', 'min_driver = "550-54-14"', "expected a driver version"),
        ("drivers.toml", 'min_driver = "550.54.14"', 'min_driver = "530.1.1"', "lower than CUDA"),
        (
            "drivers.toml",
            'label = "CUDA 12.4 Update 1"\nga = false',
            'label = "CUDA 12.4 Update 1"\nga = true',
            "exactly one is needed",
        ),
        ("gpus.toml", 'name = "L4"', 'name = "L4"\nconfidence = "maybe"', "expected one of"),
        ("frameworks/torch.toml", 'cuda = "12.4"', 'cuda = "12.7"', "CUDA 12.7 is not a CUDA release"),
        (
            "frameworks/torch.toml",
            'pypi_variant = "cu124"',
            'pypi_variant = "cu999"',
            "pypi_variant 'cu999' is not one of its variants",
        ),
        (
            "frameworks/torch.toml",
            'arch = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"',
            'arch = "hopper"',
            "expected an arch list",
        ),
        ("frameworks/jax.toml", "\n  [[release.variant]]\n", "\n  [[release.variants]]\n", "unknown key"),
        ("cuda.toml", "\n[[image]]\n", "\n[[images]]\n", "did you mean 'image'"),
        ("drivers.toml", "[[cuda]]", "[[cuda]\n", "not valid TOML"),
    ],
)
def test_broken_rows_are_named(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path, file: str, old: str, new: str, expected: str
) -> None:
    edit(matrix_copy / file, old, new)
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert expected in out
    assert file.split("/")[-1] in out
    assert "Traceback" not in out


def test_duplicate_gpu_alias(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    gpus = matrix_copy / "gpus.toml"
    gpus.write_text(
        gpus.read_text() + '\n[[gpu]]\nname = "H100 clone"\naliases = ["h100-sxm"]\n'
        'compute_capability = "9.0"\narchitecture = "Hopper"\nfirst_cuda = "11.8"\n'
        'source = "https://developer.nvidia.com/cuda-gpus"\n'
    )
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "aliases must be unique" in out


def test_branch_contradicting_floors(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    edit(
        matrix_copy / "drivers.toml",
        'branch = 550\nnative_cuda = "12.4"',
        'branch = 550\nnative_cuda = "12.3"',
    )
    code, out = check(capsys, matrix_copy)
    assert code == 1
    assert "R550 says native CUDA 12.3" in out


def test_cache_follows_content(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    assert check(capsys, matrix_copy)[0] == 0
    edit(matrix_copy / "gpus.toml", 'name = "L4"', 'name = "L4"\nbogus = 1')
    assert check(capsys, matrix_copy)[0] == 1  # the cached good parse is not reused


def test_the_cache_is_keyed_by_the_content_digest_and_a_hit_must_name_it(
    matrix_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: the key was crc32 + adler32 + size, which a hostile matrix directory can match, so one
    `matrix check --matrix DIR` of a pull request poisoned the cache the genuine matrix then read. Now
    the entry is named by the files' sha256 (the digest a lock records), and an entry under that name
    that names another digest, or holds rows the genuine files do not, is never used."""
    import json

    from envbuild.matrix.load import load_matrix

    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(cache))
    genuine = load_matrix(matrix_copy)
    (entry,) = cache.glob("matrix-*.json")
    assert entry.name.endswith(f"-{genuine.digest}.json")
    planted = json.loads(entry.read_text())
    gpus = next(rel for rel in planted["files"] if rel == "gpus.toml")
    planted["files"][gpus]["data"]["gpu"][0]["name"] = "PLANTED"
    planted["digest"] = "0" * 64
    entry.write_text(json.dumps(planted))
    assert "PLANTED" not in {g.name for g in load_matrix(matrix_copy).gpus}  # a hit names the digest
    # the name is the digest: another directory's files can never be read under it
    edit(matrix_copy / "gpus.toml", 'name = "L4"', 'name = "L4"  # edited')
    assert load_matrix(matrix_copy).digest != genuine.digest
    assert len(list(cache.glob("matrix-*.json"))) == 2
