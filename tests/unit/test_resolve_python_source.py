"""`resolve -f` answers what render will build (issue 34 item 8): where the Python comes from.

A python the target's OS does not ship used to be shown as stacks by `resolve -f` and refused by
render. One rule (resolve/python_source.py) now runs for both at the same step, so the two commands
agree: the same exit code, the same error and the same fix, or both accept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main

SPEC = """[stack]
driver = "550"
framework = "torch"
gpus = ["H100"]
strategy = "wheels"
os = "{os}"
{python}
[image]
repository = "registry.example/team/torch"
"""


def write(tmp_path: Path, os: str, python: str) -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(SPEC.format(os=os, python=python))
    return path


def answers(spec: Path, capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int, str], tuple[int, str]]:
    """(exit code, stderr) of `resolve -f` and of `render --stdout`."""
    resolved = main(["resolve", "-f", str(spec)])
    resolve_err = capsys.readouterr().err
    rendered = main(["render", "-f", str(spec), "--stdout"])
    render_err = capsys.readouterr().err
    return (resolved, resolve_err), (rendered, render_err)


def test_python_311_on_ubuntu2204_is_refused_by_both_with_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, "ubuntu22.04", 'python = "3.11"\n')
    (resolved, resolve_err), (rendered, render_err) = answers(spec, capsys)
    assert resolved == rendered == 2
    assert resolve_err == render_err
    assert 'python = "3.11" is not ubuntu22.04\'s python3 (3.10)' in resolve_err
    assert "deadsnakes PPA" in resolve_err
    assert 'fix: add python-source = "deadsnakes" to [stack]' in resolve_err
    assert 'os = "debian12" (whose python3 is 3.11)' in resolve_err


def test_the_oses_own_python_is_accepted_by_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, "ubuntu22.04", 'python = "3.10"\n')
    resolved = main(["resolve", "-f", str(spec)])
    out = capsys.readouterr().out
    assert resolved == 0 and "python 3.10 (ubuntu22.04's python3)" in out
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    assert "ppa:deadsnakes" not in capsys.readouterr().out


def test_the_opt_in_is_accepted_by_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, "ubuntu22.04", 'python = "3.11"\npython-source = "deadsnakes"\n')
    assert main(["resolve", "-f", str(spec)]) == 0
    assert "python 3.11, compat native" in capsys.readouterr().out
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    assert "ppa:deadsnakes/ppa" in capsys.readouterr().out


def test_a_non_ubuntu_os_refuses_another_python_in_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, "debian12", 'python = "3.12"\n')
    (resolved, resolve_err), (rendered, render_err) = answers(spec, capsys)
    assert resolved == rendered == 2 and resolve_err == render_err
    assert "debian12's python3 (3.11), and only Ubuntu has a standard source" in resolve_err


def test_a_flag_override_meets_the_same_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`resolve -f --os debian12` for a python 3.11 target: debian12's own python3, so it resolves."""
    spec = write(tmp_path, "ubuntu22.04", 'python = "3.11"\n')
    assert main(["resolve", "-f", str(spec), "--os", "debian12"]) == 0
    assert "os debian12 (--os)" in capsys.readouterr().out
