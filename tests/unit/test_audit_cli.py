"""`envbuild audit` on local targets that need no download: bad input exits 2 naming it, GPUs come
from the spec, and the JSON shape. The real-wheel verdicts are in tests/integration/test_audit_wheel.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.audit import plain_elf, truncated


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _wheel(path: Path, tmp_path: Path) -> Path:
    """A wheel holding one real ELF library without device code."""
    library = plain_elf(tmp_path / "build" / "libplain.so")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(library, "plain/libplain.so")
        archive.writestr("plain-1.0.dist-info/METADATA", "Name: plain\nVersion: 1.0\n")
    return path


def _refused(code: int, err: str, name: str) -> None:
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err
    assert f"error: audit {name}" in err and "fix:" in err


def test_missing_path_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "libgone.so")
    code, _, err = run_cli(capsys, "audit", missing, "--gpu", "H100")
    _refused(code, err, missing)
    assert "no such file or directory" in err


def test_missing_wheel_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "gone-1.0-py3-none-any.whl")
    code, _, err = run_cli(capsys, "audit", missing, "--gpu", "H100")
    _refused(code, err, missing)


def test_non_elf_file_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = tmp_path / "notes.so"
    text.write_text("not a library\n")
    code, _, err = run_cli(capsys, "audit", str(text), "--gpu", "H100")
    _refused(code, err, str(text))
    assert "not an ELF shared object" in err


def test_truncated_library_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    whole = plain_elf(tmp_path / "whole.so")
    cut = truncated(whole, tmp_path / "libcut.so", whole.stat().st_size - 100)
    code, _, err = run_cli(capsys, "audit", str(cut), "--gpu", "H100")
    _refused(code, err, str(cut))
    assert "truncated ELF file" in err


@pytest.mark.parametrize("kept", [5, 52, 60, 63])
def test_an_elf_cut_inside_its_header_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kept: int
) -> None:
    """Issue 33: a 60-byte 64-bit ELF (cut inside its 64-byte header) was an internal error."""
    whole = plain_elf(tmp_path / "whole.so")
    cut = truncated(whole, tmp_path / "libcut.so", kept)
    code, _, err = run_cli(capsys, "audit", str(cut), "--gpu", "H100")
    _refused(code, err, str(cut))
    assert "truncated ELF file" in err or "not an ELF shared object" in err


def test_corrupt_wheel_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    whole = _wheel(tmp_path / "plain-1.0-py3-none-any.whl", tmp_path)
    cut = truncated(whole, tmp_path / "cut-1.0-py3-none-any.whl", whole.stat().st_size // 2)
    code, _, err = run_cli(capsys, "audit", str(cut), "--gpu", "H100")
    _refused(code, err, str(cut))
    assert "not a readable wheel" in err


def test_wheel_member_with_bad_crc_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "plain-1.0-py3-none-any.whl", tmp_path)
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("plain/libplain.so")
    start = info.header_offset + 30 + len(info.filename) + 20  # inside the compressed data
    data[start : start + 8] = b"\0" * 8
    wheel.write_bytes(bytes(data))
    code, _, err = run_cli(capsys, "audit", str(wheel), "--gpu", "H100")
    _refused(code, err, str(wheel))


def test_wheel_without_device_code_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "plain-1.0-py3-none-any.whl", tmp_path)
    code, out, err = run_cli(capsys, "audit", str(wheel), "--gpu", "K80")
    assert code == 0, err
    assert "1 shared object(s) without device code" in out
    assert "no shared object with device code" in out


def test_gpus_come_from_the_spec_without_gpu_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, two_targets: Path
) -> None:
    library = plain_elf(tmp_path / "libplain.so")
    code, out, err = run_cli(capsys, "audit", str(library), "-f", str(two_targets), "--json")
    assert code == 0, err
    assert [g["name"] for g in json.loads(out)["gpus"]] == ["H100", "L4"]


def test_gpu_flags_override_the_spec(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, two_targets: Path
) -> None:
    library = plain_elf(tmp_path / "libplain.so")
    code, out, err = run_cli(capsys, "audit", str(library), "-f", str(two_targets), "--gpu", "A100", "--json")
    assert code == 0, err
    assert [g["name"] for g in json.loads(out)["gpus"]] == ["A100"]


def test_unknown_gpu_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    library = plain_elf(tmp_path / "libplain.so")
    code, _, err = run_cli(capsys, "audit", str(library), "--gpu", "H1000000")
    assert code == 2 and "H1000000" in err and "internal error" not in err


def test_json_shape_without_device_code(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plain_elf(tmp_path / "tree" / "lib" / "libplain.so.1")
    code, out, err = run_cli(capsys, "audit", str(tmp_path / "tree"), "--gpu", "H100", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert set(document) == {
        "target", "framework", "gpus", "libraries", "without_device_code", "ok", "failures",
        "unreadable", "framework_missing", "runs", "duplicates", "duplicate_bytes",
        "skipped", "warnings",
    }  # fmt: skip
    assert document["unreadable"] == []
    assert document["gpus"] == [{"name": "H100", "compute_capability": "9.0"}]
    assert document["libraries"] == [] and document["failures"] == []
    assert document["without_device_code"] == ["lib/libplain.so.1"]
    assert document["ok"] is True and document["runs"] == {"H100": True}
    assert document["framework"] is None and document["framework_missing"] is False


def test_framework_without_its_libraries_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A CPU-only build audited for GPUs: nothing to judge must not pass as "every GPU runs"."""
    wheel = _wheel(tmp_path / "plain-1.0-py3-none-any.whl", tmp_path)
    code, out, err = run_cli(capsys, "audit", str(wheel), "--gpu", "H100", "--framework", "torch")
    assert code == 1, err
    assert "error: no torch library with device code (*torch/lib/libtorch_cuda.so" in out
    code, out, _ = run_cli(capsys, "audit", str(wheel), "--framework", "torch")
    assert code == 0, "with no GPU asked for, there is nothing to fail"
