"""Driver, CUDA and compute-capability parsing: the vocabularies every flag and row uses."""

from __future__ import annotations

import pytest

from envbuild.errors import UsageError
from envbuild.matrix.versions import format_driver, parse_compute_capability, parse_driver, parse_driver_floor


@pytest.mark.parametrize(
    ("text", "parts", "bare", "shown"),
    [
        ("550", (550,), True, "R550"),
        ("R550", (550,), True, "R550"),
        ("r535", (535,), True, "R535"),
        ("550.54", (550, 54), False, "550.54"),
        ("550.54.15", (550, 54, 15), False, "550.54.15"),
        ("450.80.02", (450, 80, 2), False, "450.80.02"),
        (" 570.26 ", (570, 26), False, "570.26"),
    ],
)
def test_driver_forms(text: str, parts: tuple[int, ...], bare: bool, shown: str) -> None:
    driver = parse_driver(text)
    assert (driver.parts, driver.bare, str(driver)) == (parts, bare, shown)


@pytest.mark.parametrize("text", ["", "abc", "55", "550.", "550.54.15.1", "R550.54", "5500", "550,54"])
def test_bad_driver_is_usage_error_naming_flag_and_forms(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_driver(text)
    rendered = info.value.render()
    assert "--driver" in rendered
    assert "550.54.15" in rendered


@pytest.mark.parametrize(
    ("driver", "floor", "expected"),
    [
        ("550.54.15", "550.54.14", True),
        ("550.54.14", "550.54.14", True),
        ("550.54.13", "550.54.14", False),
        ("550.54", "550.54.14", False),  # two components are read as 550.54.0
        ("570.26", "570.26", True),
        ("570.124.06", "570.26", True),
        ("550", "550.54.15", True),  # a current R550 meets every R550 floor
        ("550", "560.28.03", False),
        ("R580", "525.60.13", True),
    ],
)
def test_driver_meets_floor(driver: str, floor: str, expected: bool) -> None:
    assert parse_driver(driver).at_least(parse_driver_floor(floor)) is expected


def test_driver_floor_keeps_nvidia_spelling() -> None:
    assert format_driver(parse_driver_floor("450.80.02")) == "450.80.02"
    assert format_driver(parse_driver_floor("570.26")) == "570.26"
    with pytest.raises(ValueError):
        parse_driver_floor("R550")


@pytest.mark.parametrize(
    ("text", "cc"),
    [
        ("8.9", (8, 9)),
        ("12.0", (12, 0)),
        ("sm_89", (8, 9)),
        ("SM89", (8, 9)),
        ("sm_120", (12, 0)),
        ("compute_90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("H100", None),
        ("89", None),
        ("8.", None),
    ],
)
def test_compute_capability_forms(text: str, cc: tuple[int, int] | None) -> None:
    assert parse_compute_capability(text) == cc
