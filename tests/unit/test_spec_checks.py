"""Issue 17 items 6 and 7: settings that used to be silently ignored or contradicted are refused
(exit 2, naming the file, the field and the way out), numbers where a string belongs say how to quote
them, and one run reports every problem in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.spec.model import load_spec


def render(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str, str]:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(text)
    code = main(["render", "-f", str(spec), "--stdout"])
    out, err = capsys.readouterr()
    return code, out, err


TORCH_271 = '[stack]\ndriver = "580"\nframework = "torch==2.7.1"\n'


# --- item 6: a framework pin in [packages] pip ---------------------------------------------------


def test_a_pip_pin_that_contradicts_the_framework_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = render(tmp_path, capsys, TORCH_271 + '\n[packages]\npip = ["torch==2.5.1"]\n')
    assert code == 2 and out == ""
    assert "[packages] pip" in err and "'torch==2.5.1'" in err and "torch 2.7.1" in err
    assert 'fix: set framework = "torch==2.5.1" in [stack]' in err and "or drop the pin" in err
    assert "internal error" not in err


@pytest.mark.parametrize("pin", ["torch==2.7.1", "torch>=2.6", "torch[opt-einsum]>=2.7,<2.8"])
def test_a_pip_pin_the_resolved_framework_satisfies_is_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pin: str
) -> None:
    code, out, err = render(tmp_path, capsys, TORCH_271 + f'\n[packages]\npip = ["{pin}"]\n')
    assert code == 0, err
    assert "torch 2.7.1" in out


# --- item 6: conda packages, os, and a Python only a PPA has ------------------------------------


def test_conda_packages_without_a_conda_target_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = render(tmp_path, capsys, TORCH_271 + '\n[packages]\nconda = ["numpy"]\n')
    assert code == 2
    assert "[packages] conda" in err and 'no target uses strategy = "conda"' in err
    assert "fix:" in err and "move them to [packages] pip" in err
    # one conda target among others uses them: fine
    mixed = (
        TORCH_271
        + '\n[packages]\nconda = ["numpy"]\n\n[[target]]\nname = "w"\n\n'
        + ('[[target]]\nname = "c"\nstrategy = "conda"\nframework = "torch"\n')
    )
    spec = tmp_path / "mixed.toml"
    spec.write_text(mixed)
    assert [t.stack.strategy for t in load_spec(str(spec)).targets] == ["wheels", "conda"]


def test_os_with_the_conda_strategy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = render(
        tmp_path,
        capsys,
        '[stack]\ndriver = "580"\nframework = "jax"\nstrategy = "conda"\nos = "ubuntu24.04"\n',
    )
    assert code == 2
    assert "[stack] os = 'ubuntu24.04'" in err and "mambaorg/micromamba" in err
    assert "fix: remove os" in err
    # an os in [stack] that the wheels targets use, inherited by a conda target, is not an error
    inherited = (
        '[stack]\ndriver = "580"\nframework = "jax"\nos = "ubuntu24.04"\n\n[[target]]\nname = "w"\n\n'
        '[[target]]\nname = "c"\nstrategy = "conda"\n'
    )
    spec = tmp_path / "inherited.toml"
    spec.write_text(inherited)
    assert len(load_spec(str(spec)).targets) == 2


def test_a_python_only_deadsnakes_has_needs_the_opt_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = '[stack]\ndriver = "580"\nframework = "torch"\npython = "3.12"\nos = "ubuntu22.04"\n'
    code, out, err = render(tmp_path, capsys, text)
    assert code == 2 and "deadsnakes" not in out
    assert 'python = "3.12" is not ubuntu22.04\'s python3 (3.10)' in err
    assert 'python-source = "deadsnakes"' in err and "ubuntu24.04" in err  # whose python3 is 3.12
    code, out, err = render(tmp_path, capsys, text + 'python-source = "deadsnakes"\n')
    assert code == 0, err
    assert "ppa:deadsnakes/ppa" in out and "--python /usr/bin/python3.12 /opt/venv" in out
    # the OS's own Python needs no opt-in
    code, out, _ = render(tmp_path, capsys, text.replace("3.12", "3.10"))
    assert code == 0 and "deadsnakes" not in out


def test_python_source_accepts_only_what_it_means(tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text('[stack]\ndriver = "580"\nframework = "torch"\npython-source = "ppa"\n')
    with pytest.raises(UsageError, match="accepted: system, deadsnakes"):
        load_spec(str(spec))


# --- item 7: numbers where strings belong, and every problem at once ----------------------------


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("driver = 550", 'use driver = "550"'),
        ("python = 3.10", 'use python = "3.10"'),  # TOML reads 3.10 as the float 3.1
        ("cuda = 12.4", 'use cuda = "12.4"'),
        ("gpus = [8.9, 9.0]", 'use gpus = ["8.9", "9.0"]'),
    ],
)
def test_a_number_where_a_string_belongs_says_how_to_quote_it(tmp_path: Path, line: str, hint: str) -> None:
    spec = tmp_path / "envbuild.toml"
    key = line.split(" ")[0]
    base = {"driver": 'driver = "580"'}
    rest = "\n".join(v for k, v in base.items() if k != key)
    spec.write_text(f'[stack]\n{rest}\nframework = "torch"\n{line}\n')
    with pytest.raises(UsageError) as info:
        load_spec(str(spec))
    rendered = info.value.render()
    assert hint in rendered and f"[stack] {key}" in rendered


def test_every_problem_in_the_file_is_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(
        '[stack]\ndriver = 550\nframework = "torch"\nstrategy = "docker"\ndrivr = "x"\n\n'
        '[packages]\npip = ["numpy && id"]\n\n[image]\nuser = "root"\n\n[smoke]\nsteps = 0\n\n'
        '[[target]]\nname = "Bad Name"\n'
    )
    code = main(["render", "-f", str(spec), "--stdout"])
    err = capsys.readouterr().err
    assert code == 2
    assert "has 7 problems" in err
    for needle in (
        'use driver = "550"',
        "[stack] strategy = 'docker'",
        "unknown key 'drivr'",
        "[packages] pip[0]",
        "[image] user = 'root'",
        "[smoke] steps = 0",
        "[[target]] #1 name = 'Bad Name'",
    ):
        assert needle in err, needle
    assert err.count("fix:") >= 7  # each problem keeps its own way out
