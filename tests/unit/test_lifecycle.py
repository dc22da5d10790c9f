"""nvidia/cuda end of life: image states, the nearest supported release, and the schema of the dates.

Worked out by hand from the bundled matrix: 12.4 images inherit R550's EOL (2025-04), 12.2 R535's
(2026-06), 13.0 R580's (2028-06); NVIDIA deletes EOL tags six months later ([image_policy]).
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.lifecycle import (
    add_months,
    base_image_warning,
    image_lifecycle,
    nearest_supported,
    parse_cuda_tag,
    today,
)
from envbuild.matrix.load import default_matrix_dir, load_matrix
from envbuild.plan.eolfix import base_image_advice
from envbuild.plan.plan import build_plan
from envbuild.spec.model import load_spec
from tests.helpers.paths import EXAMPLES

DIGEST = "@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def day(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


@pytest.mark.parametrize(
    "on, state",
    [
        ("2024-06-01", "supported"),
        ("2025-03-01", "ending"),  # within 90 days of 2025-04-30
        ("2025-05-01", "eol"),
        ("2025-10-30", "eol"),  # the deletion date itself is still before deletion
        ("2025-10-31", "deletion-due"),
    ],
)
def test_12_4_follows_r550(matrix, on: str, state: str) -> None:
    life = image_lifecycle(matrix, (12, 4, 1), day(on))
    assert life.state == state
    assert (life.eol, life.delete_on, life.branch) == (day("2025-04-30"), day("2025-10-30"), 550)


def test_other_states(matrix) -> None:
    assert image_lifecycle(matrix, (12, 4, 0), day("2024-01-01")).state == "superseded"
    assert image_lifecycle(matrix, (12, 4, 0), day("2024-01-01")).row.cuda == (12, 4, 1)
    # R555 (12.5's branch) has no EOL on record: unknown, never guessed
    assert image_lifecycle(matrix, (12, 5, 1), day("2026-11-29")).state == "unknown"
    assert image_lifecycle(matrix, (10, 2, 0), day("2026-11-29")).state == "unknown"
    assert image_lifecycle(matrix, (13, 0, 2), day("2026-11-29")).state == "supported"


def test_tags_parse_every_flavor_spelling() -> None:
    def parts(tag: str) -> tuple | None:
        parsed = parse_cuda_tag(tag)
        return None if parsed is None else (parsed.cuda, parsed.cudnn, parsed.kind, parsed.os)

    assert parts("12.4.1-cudnn-runtime-ubuntu22.04") == ((12, 4, 1), "cudnn", "runtime", "ubuntu22.04")
    assert parts("11.8.0-cudnn8-devel-ubi8") == ((11, 8, 0), "cudnn8", "devel", "ubi8")
    assert parts("13.1.0-base-rockylinux10") == ((13, 1, 0), None, "base", "rockylinux10")
    assert parts("latest") is None and parts("12.4-runtime-ubuntu22.04") is None


def test_nearest_supported_keeps_flavor_and_os(matrix) -> None:
    on = day("2026-11-29")
    tag = parse_cuda_tag("12.4.1-cudnn-runtime-ubuntu22.04")
    target = nearest_supported(matrix, tag, on)
    assert target is not None and tag.with_release(target) == "13.0.2-cudnn-runtime-ubuntu22.04"
    # on a day when 12.8 was still supported, the same major comes first
    early = nearest_supported(matrix, tag, day("2025-06-01"))
    assert early is not None and early.cuda == (12, 8, 1)
    # no release offers cuDNN images on an OS nobody ships
    assert nearest_supported(matrix, parse_cuda_tag("12.4.1-cudnn-runtime-ubuntu16.04"), on) is None


def test_warning_names_the_nearest_supported_release(matrix) -> None:
    warning = base_image_warning(
        matrix, f"nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04{DIGEST}", day("2026-11-29")
    )
    assert warning is not None and warning.state == "deletion-due"
    assert "past end of life (2025-04-30, with driver branch R550)" in warning.message
    assert "deletion date (2025-10-30)" in warning.message
    assert "nvidia/cuda:13.0.2-cudnn-runtime-ubuntu22.04" in warning.fix
    assert "driver >= 580.65.06" in warning.fix and 'cuda = "13.0"' in warning.fix

    eol = base_image_warning(matrix, "nvcr.io/nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04", day("2026-11-29"))
    assert eol is not None and eol.state == "eol" and "due 2026-12-30" in eol.message
    old_patch = base_image_warning(matrix, "nvidia/cuda:12.4.0-runtime-ubuntu22.04", day("2024-06-01"))
    assert old_patch is not None and old_patch.state == "superseded"
    assert "nvidia/cuda:12.4.1-runtime-ubuntu22.04" in old_patch.fix
    mirror = base_image_warning(
        matrix, "registry.corp:5000/mirror/nvidia/cuda:12.4.1-base-ubuntu22.04", day("2026-01-01")
    )
    assert mirror is not None and mirror.state == "deletion-due"


@pytest.mark.parametrize(
    "reference",
    [
        "nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04",  # supported until 2028-06
        "ubuntu:22.04" + DIGEST,  # not an nvidia/cuda image
        "nvidia/cuda:my-own-tag",  # not NVIDIA's tag scheme
        "not a reference",
    ],
)
def test_no_warning(matrix, reference: str) -> None:
    assert base_image_warning(matrix, reference, day("2026-11-29")) is None


def test_a_deleted_row_is_reported_as_deleted(tmp_path: Path) -> None:
    root = tmp_path / "matrix"
    shutil.copytree(default_matrix_dir(), root)
    cuda = root / "cuda.toml"
    cuda.write_text(
        cuda.read_text().replace('cuda = "12.4.1"\n', 'cuda = "12.4.1"\ndeleted = "2026-01-15"\n', 1)
    )
    matrix = load_matrix(root)
    warning = base_image_warning(matrix, "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", day("2026-11-29"))
    assert warning is not None and warning.state == "deleted"
    assert "was deleted from the registry (seen gone 2026-01-15)" in warning.message
    assert matrix.image_for((12, 4), "ubuntu22.04") is None


def test_months_are_added_to_the_end_of_month() -> None:
    assert add_months(day("2025-08-31"), 6) == day("2026-02-28")
    assert add_months(day("2026-06-30"), 6) == day("2026-12-30")


def test_today_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILD_TODAY", "2027-01-02")
    assert today() == day("2027-01-02")
    monkeypatch.setenv("ENVBUILD_TODAY", "next tuesday")
    with pytest.raises(UsageError, match="ENVBUILD_TODAY='next tuesday' is not a date"):
        today()


def test_eol_dates_must_be_months(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "matrix"
    shutil.copytree(default_matrix_dir(), root)
    drivers = root / "drivers.toml"
    drivers.write_text(drivers.read_text().replace('eol = "2026-06"', 'eol = "June 2026"', 1))
    assert main(["matrix", "check", "--matrix", str(root)]) == 1
    err = capsys.readouterr().err
    assert "drivers.toml: [[branch]]" in err and "eol = 'June 2026'" in err and 'a month "YYYY-MM"' in err


# --- issue 17 item 8: the way out of an EOL base image is checked against the spec ---------------

TF_EXAMPLE = EXAMPLES / "tensorflow-base-image" / "envbuild.toml"


def _locked_base(matrix, spec_path: Path) -> tuple:
    spec = load_spec(str(spec_path))
    target = spec.targets[0]
    return spec, target, build_plan(matrix, spec, target).base_image + DIGEST


def test_tf_example_eol_fix_is_a_driver_upgrade_that_resolves(
    matrix, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_TODAY", "2026-11-30")
    spec, target, base = _locked_base(matrix, TF_EXAMPLE)
    assert base.startswith("nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04@")  # R535's CUDA, ended 2026-06
    advice = base_image_advice(matrix, spec, target, base, day("2026-11-30"))
    assert advice is not None and advice.state == "eol"
    # before: 'set cuda = "13.0"', which resolves to nothing on R535 (exit 3)
    assert 'cuda = "13.0"' not in advice.fix
    assert "upgrade the driver to R580 (LTSB, supported until 2028-06) or later" in advice.fix
    assert 'set driver = "580" in [stack]' in advice.fix
    assert dict(advice.edits) == {"driver": "580"}

    # apply the fix as written: it resolves, renders, and the new base image draws no warning
    fixed = tmp_path / "envbuild.toml"
    fixed.write_text(TF_EXAMPLE.read_text().replace('driver = "535"', 'driver = "580"'))
    assert main(["resolve", "-f", str(fixed)]) == 0
    capsys.readouterr()
    spec, target, base = _locked_base(matrix, fixed)
    assert base_image_advice(matrix, spec, target, base, day("2026-11-30")) is None


def test_when_the_driver_runs_a_supported_release_the_fix_is_that_release(
    matrix, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "envbuild.toml"
    text = '[stack]\ndriver = "580"\nframework = "torch"\nstrategy = "base-image"\ncuda = "12.4"\n'
    path.write_text(text)
    spec, target, base = _locked_base(matrix, path)
    advice = base_image_advice(matrix, spec, target, base, day("2026-11-30"))
    assert advice is not None and dict(advice.edits) == {"cuda": "13.0"}
    assert 'set cuda = "13.0" in [stack]' in advice.fix and "upgrade" not in advice.fix
    path.write_text(text.replace('cuda = "12.4"', 'cuda = "13.0"'))
    assert main(["resolve", "-f", str(path)]) == 0
    capsys.readouterr()
