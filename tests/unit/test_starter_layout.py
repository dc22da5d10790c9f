"""`envbuild init`'s starter lines its comments up (issue 39, item 5): a filled-in `driver` or `gpus` line
keeps the template's comment column when it fits, and at least two spaces before its comment when it
does not (`gpus = ["H100", "L4", "A100"]# every GPU...` ran into it)."""

from __future__ import annotations

import pytest

from envbuild._util import toml
from envbuild.spec.starter import starter_text


def code_and_gap(line: str) -> tuple[str, int, int]:
    """(the code before the comment, the spaces before '#', the column of '#') of a commented line."""
    code, _, _ = line.partition("#")
    return code.rstrip(), len(code) - len(code.rstrip()), len(code)


def template_column() -> int:
    """Where the template's own comments start: its `framework = "torch"  # required` line."""
    line = next(x for x in starter_text("550").splitlines() if x.startswith("framework = "))
    return code_and_gap(line)[2]


def line_of(text: str, key: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{key} = "))


@pytest.mark.parametrize(
    "gpus",
    [
        ("H100",),
        ("H100", "L4", "A100"),  # 29 characters: the column, two spaces before it
        ("H100", "L4", "A100", "L40S"),  # 37: past it
        ("NVIDIA H100 80GB HBM3", "RTX 4090", "L4"),
    ],
)
def test_a_gpus_line_keeps_the_column_or_two_spaces(gpus: tuple[str, ...]) -> None:
    text = starter_text("550", gpus)
    code, gap, column = code_and_gap(line_of(text, "gpus"))
    assert code == "gpus = [" + ", ".join(f'"{g}"' for g in gpus) + "]"
    if len(code) + 2 <= template_column():
        assert column == template_column()
    else:
        assert gap == 2
    assert toml.loads(text)["stack"]["gpus"] == list(gpus)


@pytest.mark.parametrize("driver", ["550", "550.54.15", "R550." + "1" * 20])
def test_the_driver_line_keeps_the_column_or_two_spaces(driver: str) -> None:
    text = starter_text(driver, ("H100",))
    code, gap, column = code_and_gap(line_of(text, "driver"))
    assert code == f'driver = "{driver}"'
    assert column == template_column() if len(code) + 2 <= template_column() else gap == 2
    assert toml.loads(text)["stack"]["driver"] == driver
