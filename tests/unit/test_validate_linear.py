"""Issue 33: the credentials-in-a-URL check is linear in its input. The regex it replaces searched
`[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\s]*@`, which tries every start in a run of letters: quadratic, so a
1 MB label in a pull request's spec stalled `render`, `ci` and `bake` for about 45 minutes. The new
check must say exactly what the regex says."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from envbuild.spec.validate import has_userinfo

REGEX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*@")
PIECES = st.sampled_from(["://", "@", "/", "?", "#", " ", "\t", "a", "Z", "9", "+", ".", "-", ":", "é", "x1"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=24).map("".join))
def test_it_agrees_with_the_regex_it_replaces(text: str) -> None:
    assert has_userinfo(text) == bool(REGEX.search(text))


def test_the_known_cases() -> None:
    assert has_userinfo("pip install https://user:token@pypi.example/simple")
    assert has_userinfo("git+ssh://git@github.com/acme/x")
    assert not has_userinfo("https://pypi.example/simple/@scope")  # '@' after the path starts
    assert not has_userinfo("mailto:ops@example.com")
    assert not has_userinfo("0://x@y")  # a scheme starts with a letter


def test_a_megabyte_run_of_letters_is_one_pass() -> None:
    """What took the regex about 45 minutes: one `://` scan back over the run, one forward (no clock
    here: a quadratic check would not finish in any CI's time, and CI would say so)."""
    assert not has_userinfo("a" * 1_000_000 + "://" + "b" * 1_000_000)
    assert has_userinfo("a" * 1_000_000 + "://u:p@h")
