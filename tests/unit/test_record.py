"""envbuild._util.record: every field by name, none unknown (the set comparison of issue 34 item 9
must refuse exactly what the field-by-field check refused)."""

from __future__ import annotations

import pytest

from envbuild._util.record import Record
from envbuild.matrix.versions import parse_minor


class Pair(Record):
    __slots__ = ("left", "right")


def test_every_field_by_name() -> None:
    assert Pair(left=1, right=2).replace(right=3) == Pair(left=1, right=3)
    with pytest.raises(TypeError, match=r"Pair\(\) needs every field by name: missing right$"):
        Pair(left=1)
    with pytest.raises(TypeError, match=r"missing right; unknown other$"):
        Pair(left=1, other=2)
    with pytest.raises(TypeError, match=r"unknown extra$"):
        Pair(left=1, right=2, extra=3)


def test_parse_minor_remembers_only_what_parses() -> None:
    assert parse_minor("12.4") == (12, 4) == parse_minor("12.4")
    for bad in ("12", "twelve", "12.x"):
        with pytest.raises(ValueError, match=r"is not an X\.Y version"):
            parse_minor(bad)
