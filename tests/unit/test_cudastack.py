"""The real CUDA stack the end-to-end image test builds (tests/fixtures/cuda) is the one the matrix says
torch 2.6.0 cu124 installs: a pin that drifted from matrix/requirements.toml would test another stack
than the one `envbuild resolve --driver 550 --framework torch==2.6.*` gives users."""

from __future__ import annotations

from envbuild.matrix.model import Matrix
from tests.helpers import cudastack


def test_the_pinned_nvidia_wheels_are_the_matrix_rows_requirements(matrix: Matrix) -> None:
    row = matrix.requirements("torch", "2.6.0", "cu124")
    assert row is not None
    pins = cudastack.pinned()
    nvidia = {name: f"=={version}" for name, (version, _) in pins.items() if name.startswith("nvidia-")}
    assert nvidia == row.bounds


def test_the_pinned_torch_is_the_file_the_matrix_row_was_read_from(matrix: Matrix) -> None:
    row = matrix.requirements("torch", "2.6.0", "cu124")
    assert row is not None and row.source.endswith("#sha256=" + cudastack.pinned()["torch"][1])
    assert cudastack.pinned()["torch"][0] == "2.6.0"


def test_the_cache_key_follows_the_list(tmp_path, monkeypatch) -> None:
    edited = tmp_path / "list.txt"
    edited.write_text(cudastack.PINNED.read_text() + "# one more line\n")
    before = cudastack.key()
    monkeypatch.setattr(cudastack, "PINNED", edited)
    assert cudastack.key() != before and len(before) == 16
