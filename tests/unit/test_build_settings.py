"""BuildSettings (issue 35 item 6): every `envbuild build` setting is its flag, else its ENVBUILD_*
variable, else envbuild.toml, else the default; a variable it does not accept is exit 2 naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild.audit.skip import parse_flags
from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.spec.model import parse_spec
from envbuild.stages.settings import RULES, build_settings

NOT_GIVEN = {rule.name: None for rule in RULES}


def spec_of(tmp_path: Path, extra: str = ""):
    text = f'[stack]\ndriver = "550"\nframework = "torch"\n\n{extra}'
    path = tmp_path / "envbuild.toml"
    path.write_text(text)
    return parse_spec(toml.loads(text), str(path), "0" * 64, text)


def test_nothing_given_is_the_defaults(tmp_path: Path) -> None:
    settings = build_settings(NOT_GIVEN, spec_of(tmp_path), {})
    assert (settings.out_dir, settings.builder, settings.push, settings.jobs) == ("build", "auto", False, 1)
    assert (settings.base_image, settings.wheelhouse, settings.no_cache) == (None, None, False)
    # [smoke] device has the spec's own default, gpu: the spec layer gives it
    assert settings.smoke_device == "gpu" and settings.sources["smoke_device"] == "envbuild.toml"
    assert settings.sources["push"] == "default"


def test_a_flag_wins_over_the_variable_which_wins_over_the_spec(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, '[smoke]\ndevice = "gpu"\n')
    env = {"ENVBUILD_SMOKE_DEVICE": "cpu", "ENVBUILD_PUSH": "1", "ENVBUILD_JOBS": "3"}
    from_env = build_settings(NOT_GIVEN, spec, env)
    assert (from_env.smoke_device, from_env.push, from_env.jobs) == ("cpu", True, 3)
    assert from_env.sources["smoke_device"] == "ENVBUILD_SMOKE_DEVICE"
    flagged = build_settings({**NOT_GIVEN, "smoke_device": "gpu", "jobs": 2}, spec, env)
    assert (flagged.smoke_device, flagged.jobs) == ("gpu", 2)
    assert flagged.sources["smoke_device"] == "--smoke-device" and flagged.sources["jobs"] == "-j"


@pytest.mark.parametrize("text", ["0", "false", "no", "off", ""])
def test_a_false_or_empty_variable_does_not_push(tmp_path: Path, text: str) -> None:
    """CI expands a secret or variable that is not defined to "": that is no value, not a bad one."""
    assert build_settings(NOT_GIVEN, spec_of(tmp_path), {"ENVBUILD_PUSH": text}).push is False


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("ENVBUILD_PUSH", "sometimes", "is not 1, true, yes, on, or 0, false, no, off"),
        ("ENVBUILD_JOBS", "two", "is not a whole number, 1 or more"),
        ("ENVBUILD_JOBS", "0", "is not a whole number, 1 or more"),
        ("ENVBUILD_BUILDER", "kaniko", "is not auto, api, buildkit"),
        ("ENVBUILD_SMOKE_DEVICE", "tpu", "is not cpu or gpu"),
        ("ENVBUILD_BASE_IMAGE", "Not A Reference", "is not an image reference"),
        ("ENVBUILD_WHEELHOUSE", "/nonexistent/wheels", "is not an existing directory of wheels"),
    ],
)
def test_a_variable_it_does_not_accept_names_itself(tmp_path: Path, name: str, value: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        build_settings(NOT_GIVEN, spec_of(tmp_path), {name: value})
    assert caught.value.message == f"{name}={value!r} {said}"
    assert name in caught.value.fix and "unset it" in caught.value.fix


def test_a_flag_of_zero_jobs_is_refused_as_before(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^-j 0 must be 1 or more$"):
        build_settings({**NOT_GIVEN, "jobs": 0}, spec_of(tmp_path), {})


def test_a_skip_flag_replaces_the_specs_skip_of_the_same_library(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        '[audit]\nskip = [{library = "libtorch_cuda.so", reason = "old"}, '
        '{library = "libnccl.so.2", reason = "kept"}]\n',
    )
    settings = build_settings(NOT_GIVEN, spec, {}, skip_audit=parse_flags(["libtorch_cuda.so=new"]))
    assert {skip.library: skip.reason for skip in settings.skip_audit} == {
        "libtorch_cuda.so": "new",
        "libnccl.so.2": "kept",
    }


def test_envbuild_build_exits_2_on_a_bad_variable_before_anything_runs(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    spec_of(tmp_path)
    monkeypatch.setenv("ENVBUILD_JOBS", "many")
    code = main(["build", "-f", str(tmp_path / "envbuild.toml"), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "ENVBUILD_JOBS='many' is not a whole number" in err
    assert not (tmp_path / "out").exists()


def test_envbuild_push_in_the_environment_lets_sign_key_through_to_its_own_check(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """--sign-key signs what a push attaches: with ENVBUILD_PUSH=1 the build pushes, so the refusal
    "nothing is pushed" must not come; the key itself is checked next (this one does not exist)."""
    spec_of(tmp_path)
    argv = ["build", "-f", str(tmp_path / "envbuild.toml"), "--sign-key", str(tmp_path / "absent.pem")]
    assert main(argv) == 2
    assert "nothing is pushed" in capsys.readouterr().err
    monkeypatch.setenv("ENVBUILD_PUSH", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "nothing is pushed" not in err and "absent.pem" in err
