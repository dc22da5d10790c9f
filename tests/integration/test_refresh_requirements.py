"""`envbuild matrix refresh --requirements` against recorded PyPI answers served on 127.0.0.1.

The recordings (envbuild/_testing/recordings) hold the real METADATA of torch 2.14.1 and 2.15.0,
tensorflow 2.18.1, jax 0.12.0.1 and its two CUDA plugins, with each file's real sha256. The matrix is
a copy of the bundled one without its requirements.toml, so every other build the matrix offers is
"not on the index" here and must get no row: only the five recorded builds are measured.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild._testing.recorded import FIXTURES, PADDING, serve_pypi, wheel_bytes
from envbuild._testing.upstream import Answer, Upstream
from envbuild._util import toml
from envbuild.cli.app import main
from envbuild.matrix.load import default_matrix_dir

DAY = "2026-11-29"
TF_METADATA = "tensorflow-2.18.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
MEASURED = {
    ("jax", "0.12.0.1", "cuda12"),
    ("jax", "0.12.0.1", "cuda13"),
    ("tensorflow", "2.18.1", "cuda12.5"),
    ("torch", "2.14.1", "cu130"),
    ("torch", "2.15.0", "cu132"),
}


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILD_TODAY", DAY)


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    root = tmp_path / "matrix"
    shutil.copytree(default_matrix_dir(), root)
    (root / "requirements.toml").unlink(missing_ok=True)
    return root


@pytest.fixture
def upstream():
    with Upstream() as server:
        serve_pypi(server)
        yield server


def refresh(capsys, upstream: Upstream, matrix: Path, *extra: str) -> tuple[int, dict, str]:
    code = main(
        ["matrix", "refresh", "--requirements", "--matrix", str(matrix), "--pypi-url", upstream.root,
         "--timeout", "10", "--json", *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else {}), err


def recorded_sha256(project: str, filename: str) -> str:
    releases = json.loads((FIXTURES / "pypi" / f"{project}.json").read_text())["releases"]
    return next(
        f["digests"]["sha256"] for files in releases.values() for f in files if f["filename"] == filename
    )


def rows(matrix: Path) -> dict[tuple[str, str, str], dict]:
    data = toml.loads((matrix / "requirements.toml").read_text())
    return {(b["framework"], b["version"], b["variant"]): b for b in data["build"]}


def test_refresh_writes_one_row_per_measured_build_citing_its_wheel(capsys, upstream, matrix) -> None:
    code, report, err = refresh(capsys, upstream, matrix)
    assert code == 0, err
    assert not (matrix / "requirements.toml").exists()  # without --write: proposed only
    added = {f["subject"] for f in report["findings"] if f["action"] == "add"}
    assert added == {" ".join(key) for key in MEASURED}

    code, report, err = refresh(capsys, upstream, matrix, "--write")
    assert code == 0 and report["written"] is True, err
    written = rows(matrix)
    assert set(written) == MEASURED

    # JAX: the plugin's METADATA under `with-cuda` is what jax[cuda12] installs
    jax = written["jax", "0.12.0.1", "cuda12"]
    plugin = "jax_cuda12_plugin-0.12.0.1-cp315-cp315-manylinux_2_27_x86_64.whl"
    assert (jax["wheel"], jax["extra"]) == ("jax-cuda12-plugin", "with-cuda")
    assert (
        jax["source"]
        == f"{upstream.root}/files/{plugin}#sha256={recorded_sha256('jax-cuda12-plugin', plugin)}"
    )
    assert jax["requires"]["nvidia-cuda-nvcc-cu12"] == ">=12.6.85"
    assert jax["requires"]["nvidia-cudnn-cu12"] == ">=9.10.2.21,<10.0"
    assert len(jax["requires"]) == 12
    cuda13 = written["jax", "0.12.0.1", "cuda13"]
    assert cuda13["wheel"] == "jax-cuda13-plugin" and cuda13["requires"]["nvidia-nvvm"] == ""
    assert cuda13["requires"]["nvidia-cudnn-cu13"] == ">=9.12.0.46,<10.0"

    # TensorFlow: its own wheel with the and-cuda extra, exact pins
    tf = written["tensorflow", "2.18.1", "cuda12.5"]
    assert (tf["wheel"], tf["extra"]) == ("tensorflow", "and-cuda")
    assert tf["source"].endswith(f"/files/{TF_METADATA}#sha256={recorded_sha256('tensorflow', TF_METADATA)}")
    assert tf["requires"]["nvidia-cudnn-cu12"] == "==9.3.0.75" and len(tf["requires"]) == 12

    # torch: PyPI's own build (the row's pypi_variant), Linux x86_64 markers, no extra
    torch = written["torch", "2.14.1", "cu130"]
    assert (torch["wheel"], torch["extra"]) == ("torch", "")
    assert torch["requires"] == {
        "cuda-bindings": ">=13.0.3,<14",
        "cuda-toolkit": "==13.0.3",
        "nvidia-cudnn-cu13": "==9.24.0.43",
        "nvidia-cusparselt-cu13": "==0.8.1",
        "nvidia-nccl-cu13": "==2.30.7",
        "nvidia-nvshmem-cu13": "==3.4.5",
    }
    # the builds download.pytorch.org serves are not measured, and the header says how many are not
    assert ("torch", "2.14.1", "cu126") not in written
    text = (matrix / "requirements.toml").read_text()
    assert text.startswith("# Written by `envbuild matrix refresh --requirements`")
    assert "download.pytorch.org" in text.split("\n[[build]]")[0]

    # METADATA came from range requests: a fraction of each wheel
    for path in {p for p, _, _, _ in upstream.log if p.startswith("/files/")}:
        assert upstream.bytes_sent(path) < PADDING / 4, path


def test_a_rerun_without_upstream_change_writes_nothing(capsys, upstream, matrix) -> None:
    assert refresh(capsys, upstream, matrix, "--write")[0] == 0
    before = (matrix / "requirements.toml").read_bytes()
    code, report, err = refresh(capsys, upstream, matrix, "--write")
    assert code == 0, err
    assert report["written"] is False
    assert [f for f in report["findings"] if f["action"] != "flag"] == []
    assert (matrix / "requirements.toml").read_bytes() == before


def test_a_changed_metadata_upstream_changes_that_row_only(capsys, upstream, matrix) -> None:
    assert refresh(capsys, upstream, matrix, "--write")[0] == 0
    before = rows(matrix)
    metadata = (FIXTURES / "metadata" / f"{TF_METADATA}.METADATA").read_text()
    changed = metadata.replace("nvidia-cudnn-cu12 ==9.3.0.75", "nvidia-cudnn-cu12 <10,>=9.3.0.75")
    assert changed != metadata
    upstream.add(
        f"/files/{TF_METADATA}",
        Answer(wheel_bytes(TF_METADATA, changed), content_type="application/octet-stream", ranges=True),
    )
    code, report, err = refresh(capsys, upstream, matrix, "--write")
    assert code == 0 and report["written"] is True, err
    [finding] = [f for f in report["findings"] if f["action"] != "flag"]
    assert finding["subject"] == "tensorflow 2.18.1 cuda12.5"
    assert "nvidia-cudnn-cu12 >=9.3.0.75,<10 (was ==9.3.0.75)" in finding["detail"]
    after = rows(matrix)
    assert after["tensorflow", "2.18.1", "cuda12.5"]["requires"]["nvidia-cudnn-cu12"] == ">=9.3.0.75,<10"
    del after["tensorflow", "2.18.1", "cuda12.5"], before["tensorflow", "2.18.1", "cuda12.5"]
    assert after == before


def test_an_unreachable_index_writes_nothing_and_keeps_every_row(capsys, upstream, matrix) -> None:
    assert refresh(capsys, upstream, matrix, "--write")[0] == 0
    before = (matrix / "requirements.toml").read_bytes()
    upstream.closed_paths.add("/pypi/tensorflow/json")  # the connection drops: not "not on the index"
    code, _, err = refresh(capsys, upstream, matrix, "--write")
    assert code == 1 and "/pypi/tensorflow/json is unreachable" in err
    assert (matrix / "requirements.toml").read_bytes() == before
