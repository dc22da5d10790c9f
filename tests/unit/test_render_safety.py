"""What a spec value can and cannot do to a rendered Dockerfile, and what render may overwrite.

Each attack is the review's own input: a Unicode line separator in a conda spec, `$` in an env
value, non-ASCII label text, credentials in a URL, a target named like a user's directory or like
the spec itself, and -o places that cannot be written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envbuild.cli.app import main

SPEC = '[stack]\ndriver = "550"\nframework = "torch"\nos = "ubuntu22.04"\n'


def _spec(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(SPEC + extra, encoding="utf-8")
    return path


def _dockerfile(spec: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    return capsys.readouterr().out


SEPARATORS = {
    "line separator": "\\u2028",
    "paragraph separator": "\\u2029",
    "next line (NEL)": "\\u0085",
    "vertical tab": "\\u000b",
    "form feed": "\\u000c",
    "carriage return": "\\r",
    "right-to-left override": "\\u202e",
    "zero-width space": "\\u200b",
}
FIELDS = {
    "conda": '[packages]\nconda = ["numpy={s}USER =0"]\n',
    "pip": '[packages]\npip = ["numpy{s}USER 0"]\n',
    "apt": '[packages]\napt = ["git{s}USER"]\n',
    "env": '[image]\nenv = {{ A = "x{s}USER root" }}\n',
    "label": '[image]\nlabels = {{ "com.example.a" = "x{s}USER root" }}\n',
    "user": '[image]\nuser = "app{s}root"\n',
    "tag": '[image]\ntags = ["v1{s}x"]\n',
    "index-url": '[packages]\nindex-url = "https://pypi.example{s}.com/simple"\n',
    "target name": '[[target]]\nname = "a{s}b"\n',
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("separator", sorted(SEPARATORS))
def test_no_field_takes_a_line_break_or_hidden_character(
    tmp_path: Path, field: str, separator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, FIELDS[field].format(s=SEPARATORS[separator]))
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_env_and_label_values_are_literal_and_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(
        tmp_path,
        '[image]\nenv = { DB_PASSWORD_HINT = "pa$word" }\nlabels = { "com.example.team" = "équipe $HOME" }\n',
    )
    dockerfile = _dockerfile(spec, capsys)
    assert 'DB_PASSWORD_HINT="pa\\$word"' in dockerfile
    assert '"com.example.team"="équipe \\$HOME"' in dockerfile
    assert "\\u00e9" not in dockerfile
    assert 'PATH="/opt/venv/bin:$PATH"' in dockerfile  # envbuild's own values still expand


def test_pip_environment_markers_are_allowed_and_shell_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, "[packages]\npip = ['numpy; python_version < \"3.12\"']\n")
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert (
        tmp_path / "out" / "default" / "requirements.txt"
    ).read_text() == 'numpy; python_version < "3.12"\n'
    for hostile in ("numpy; rm -rf /", 'numpy; python_version < "3.12"; echo x', "numpy;"):
        _spec(tmp_path, f"[packages]\npip = [{json.dumps(hostile)}]\n")
        assert main(["render", "-f", str(spec), "--stdout"]) == 2, hostile
        assert "error: " in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        '[packages]\npip = ["pkg @ https://user:pass@host.example/x.whl"]\n',
        '[packages]\nindex-url = "https://user:pass@pypi.example/simple"\n',
        '[packages]\nextra-index-urls = ["https://token@pypi.example/simple"]\n',
        '[image]\nenv = { PIP_INDEX_URL = "https://u:p@pypi.example/simple" }\n',
    ],
    ids=["pip direct reference", "index-url", "extra-index-urls", "env value"],
)
def test_credentials_in_a_url_are_refused_with_a_fix(
    tmp_path: Path, extra: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, extra)
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "user name or password" in err and "netrc" in err and "keyring" in err
    assert not (tmp_path / "out").exists()


# --- never destroy what isn't ours


def test_a_target_named_like_a_user_directory_does_not_replace_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("the team's docs\n")
    spec = _spec(tmp_path, '[[target]]\nname = "docs"\n')
    assert main(["render", "-f", str(spec), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{docs} exists and is not a build context envbuild wrote" in err
    assert sorted(os.listdir(docs)) == ["index.md"]
    assert main(["build", "-f", str(spec), "-o", str(tmp_path), "--smoke-device", "cpu"]) == 2
    assert sorted(os.listdir(docs)) == ["index.md"]  # build refuses before writing its record there


@pytest.mark.parametrize("name", ["envbuild.toml", "envbuild.lock"])
def test_a_target_may_not_be_named_like_the_spec_or_the_lock(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, f'[[target]]\nname = "{name}"\n')
    before = spec.read_bytes()
    assert main(["render", "-f", str(spec), "-o", str(tmp_path)]) == 2
    assert "is the name of the spec or its lock" in capsys.readouterr().err
    assert spec.read_bytes() == before


def test_render_replaces_its_own_contexts_old_and_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    assert (out / "default" / ".envbuild-context").is_file()
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    (out / "default" / ".envbuild-context").unlink()  # as rendered before the marker existed
    (out / "default" / "build.log").write_text("a build's log\n")
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    assert not (out / "default" / "build.log").exists()
    (out / "default" / "notes.txt").write_text("mine\n")  # a file envbuild never writes: not ours
    (out / "default" / ".envbuild-context").unlink()
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 2
    assert (out / "default" / "notes.txt").read_text() == "mine\n"
    capsys.readouterr()


# --- -o places that cannot be written: usage errors naming the path


def test_output_on_a_read_only_filesystem_is_a_usage_error(
    tmp_path: Path, mounted, capsys: pytest.CaptureFixture[str]
) -> None:
    read_only = mounted("ro,size=64k")
    assert main(["render", "-f", str(_spec(tmp_path)), "-o", str(read_only / "out")]) == 2
    err = capsys.readouterr().err
    assert f"-o {read_only / 'out'}: cannot write the build context (Read-only file system)" in err
    assert "fix: " in err


def test_output_on_a_full_filesystem_is_a_usage_error(
    tmp_path: Path, mounted, capsys: pytest.CaptureFixture[str]
) -> None:
    full = mounted("size=64k")
    with open(full / "filler", "wb") as handle, pytest.raises(OSError):
        handle.write(b"x" * (1 << 20))
        handle.flush()
    assert main(["render", "-f", str(_spec(tmp_path)), "-o", str(full / "out")]) == 2
    err = capsys.readouterr().err
    assert "cannot write the build context (No space left on device)" in err
    assert [p.name for p in (full / "out").iterdir()] == []  # the staging directory was removed


def test_output_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("x")
    assert main(["render", "-f", str(_spec(tmp_path)), "-o", str(tmp_path / "a-file")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["empty", "directory", "not a zip"])
def test_a_broken_wheel_in_the_wheelhouse_is_a_usage_error(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    wheel = wheelhouse / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    if kind == "directory":
        wheel.mkdir()
    else:
        wheel.write_bytes(b"" if kind == "empty" else b"not a zip archive")
    spec = _spec(tmp_path)
    code = main(["render", "-f", str(spec), "-o", str(tmp_path / "out"), "--wheelhouse", str(wheelhouse)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(wheel) in err and "fix: " in err and "internal error" not in err
    assert not (tmp_path / "out" / "default").exists()


def test_with_a_lock_key_an_unlocked_spec_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path)
    monkeypatch.setenv("ENVBUILD_LOCK_KEY", "k" * 32)
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 1
    assert "a lock key is set: builds must be locked" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("ENVBUILD_LOCK_KEY", "")  # an undefined CI secret: no key
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0
