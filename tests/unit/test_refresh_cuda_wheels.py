"""The pieces of bench/cuda_wheels.py that need no network (envbuild/refresh/cuda_wheels.py): which
(package, version) pairs the matrix's rows install, the wheel picked for each, and the table in
matrix/README.md, written and read back. The real readings are replayed against PyPI's wheels in
tests/integration/test_cuda_wheels_table.py."""

from __future__ import annotations

import pytest

from envbuild._util import toml
from envbuild.errors import EnvbuildError
from envbuild.refresh import cuda_wheels
from envbuild.refresh.cuda_wheels import NO_DEVICE_CODE, NOT_READ, PARTLY, WHOLE, LibraryRead, WheelRead
from envbuild.refresh.upstream import DistFile
from tests.helpers.paths import REPO

SHA = "ab" * 32


def _row(**changes) -> WheelRead:
    values = dict(
        package="nvidia-cublas-cu12",
        version="12.4.5.8",
        filename="nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl",
        sha256=SHA,
        cuobjdump="13.5.37",
        libraries=(
            LibraryRead(
                name="libcublas.so.12", read=PARTLY, reason="stopped after listing 1404 entries (exit 1): x"
            ),
            LibraryRead(name="libcublasLt.so.12", read=WHOLE, reason=None),
            LibraryRead(name="libnvblas.so.12", read=NO_DEVICE_CODE, reason=None),
        ),
        wanted_by="torch 2.5.0, 2.5.1, 2.6.0 cu124",
    )
    values.update(changes)
    return WheelRead(**values)


def test_exact_pins_are_taken_as_written_and_ranges_as_pypis_newest() -> None:
    builds = [
        {"framework": "torch", "version": "2.6.0", "variant": "cu124",
         "requires": {"nvidia-cublas-cu12": "==12.4.5.8", "triton": "==3.2.0"}},
        {"framework": "jax", "version": "0.4.25", "variant": "cuda12",
         "requires": {"nvidia-cublas-cu12": ">=12.2.5.6", "nvidia-nccl-cu12": ">=99"}},
    ]  # fmt: skip
    asked = []

    def newest(package: str, specifier: str) -> str | None:
        asked.append((package, specifier))
        return "12.9.1.4" if package == "nvidia-cublas-cu12" else None

    found, unsettled = cuda_wheels.families(
        builds, newest, [("nvidia_cudnn_cu11", "9.1.0.70", "torch 2.7.1 cu118")]
    )
    assert [(f.package, f.version, f.wanted_by) for f in found] == [
        ("nvidia-cublas-cu12", "12.4.5.8", ("torch 2.6.0 cu124",)),
        ("nvidia-cublas-cu12", "12.9.1.4", ("jax 0.4.25 cuda12",)),
        ("nvidia-cudnn-cu11", "9.1.0.70", ("torch 2.7.1 cu118",)),
    ]
    assert asked == [("nvidia-cublas-cu12", ">=12.2.5.6"), ("nvidia-nccl-cu12", ">=99")]  # never a pin
    assert unsettled == ["nvidia-nccl-cu12>=99 (jax 0.4.25 cuda12): no release on PyPI admits it"]


def test_the_rows_that_install_a_wheel_are_said_briefly() -> None:
    rows = [f"jax 0.4.{n} cuda12" for n in range(26, 39)] + ["torch 2.6.0 cu124", "named by hand"]
    assert (
        cuda_wheels.summarize(rows)
        == "jax 0.4.26-0.4.38 (13 releases) cuda12; torch 2.6.0 cu124; named by hand"
    )


def test_the_linux_x86_64_wheel_is_picked() -> None:
    def dist(name: str, yanked: bool = False) -> DistFile:
        return DistFile(
            filename=name, url=f"https://x/{name}", requires_python=None, yanked=yanked, sha256=SHA
        )

    files = [
        dist("nvidia_nccl_cu12-2.21.5-py3-none-manylinux2014_aarch64.whl"),
        dist("nvidia_nccl_cu12-2.21.5-py3-none-win_amd64.whl"),
        dist("nvidia_nccl_cu12-2.21.5-py3-none-manylinux2014_x86_64.whl"),
        dist("nvidia_nccl_cu12-2.21.5.tar.gz"),
    ]
    assert cuda_wheels.pick_wheel(files) == files[2]
    assert cuda_wheels.pick_wheel([dist(files[2].filename, yanked=True)]) is None


def test_a_row_reads_back_as_written_whatever_the_reason_holds() -> None:
    odd = "Invalid ELF in 'a|b' <weird> & \\ back"
    row = _row(libraries=(LibraryRead(name="libx.so.1", read=NOT_READ, reason=odd),))
    line = cuda_wheels.row_line(row)
    assert line.count(" | ") == 7 and "<weird>" not in line
    assert cuda_wheels.parse_row(line) == row


def test_the_table_is_replaced_between_its_markers_sorted_by_version() -> None:
    text = f"intro\n\n{cuda_wheels.TABLE_BEGIN}\nold\n{cuda_wheels.TABLE_END}\nafter\n"
    rows = [_row(version="12.10.0.1"), _row(), _row(package="nvidia-a", version="1.0")]
    written = cuda_wheels.with_table(text, rows, cuda_wheels.intro(rows, "2026-12-02"))
    assert written.startswith("intro\n\n") and written.endswith(f"{cuda_wheels.TABLE_END}\nafter\n")
    assert "old" not in written and "3 wheels, 3 with a library cuobjdump reads only partly" in written
    read = cuda_wheels.table_rows(written)
    assert list(read) == [
        ("nvidia-a", "1.0"),
        ("nvidia-cublas-cu12", "12.4.5.8"),
        ("nvidia-cublas-cu12", "12.10.0.1"),
    ]
    with pytest.raises(EnvbuildError, match="no cuda-wheels table markers"):
        cuda_wheels.with_table("no markers", rows, "")


def test_a_broken_row_is_refused_with_what_it_lacks() -> None:
    with pytest.raises(ValueError, match="not 8"):
        cuda_wheels.parse_row("| a | b |")
    line = cuda_wheels.row_line(_row()).replace(f"sha256:{SHA}", "sha256:short")
    with pytest.raises(ValueError, match="version cell"):
        cuda_wheels.parse_row(line)


def test_the_committed_table_covers_every_pinned_nvidia_wheel_of_the_matrix() -> None:
    """Every exact nvidia-* pin of requirements.toml has its row (ranges depend on PyPI's newest,
    which only the script, with PyPI, can settle)."""
    rows = cuda_wheels.table_rows((REPO / "matrix" / "README.md").read_text(encoding="utf-8"))
    builds = toml.loads((REPO / "matrix" / "requirements.toml").read_text(encoding="utf-8"))["build"]
    pinned, _ = cuda_wheels.families(builds, lambda package, specifier: None)
    missing = [(f.package, f.version) for f in pinned if (f.package, f.version) not in rows]
    assert pinned and missing == []
    assert all(row.cuobjdump for row in rows.values())  # nvidia-cuda-nvcc 13 holds no shared object
