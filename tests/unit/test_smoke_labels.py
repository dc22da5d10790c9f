"""The spec's [smoke] settings as image labels (issue 32, item 4): render writes one label per setting
from the validated spec, and `envbuild verify IMAGE` takes each from its flag, else the image's label,
else the default. A label is untrusted: it is judged by the spec's own rule, and a refused one is the
default with a warning naming the label. The Engine and registry reads are tests/engine/
test_verify_labels.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from envbuild.cli.parser import build_parser
from envbuild.errors import UsageError
from envbuild.image.imagelabels import framework_label
from envbuild.matrix.model import Matrix
from envbuild.oci.labels import FRAMEWORK, PREFIX, spec_smoke_label
from envbuild.plan.plan import build_plan
from envbuild.smoke import DEFAULT_PRECISION, DEFAULT_STEPS, DEFAULT_TIMEOUT_S
from envbuild.spec.model import SMOKE_SETTINGS, STRINGS, TABLE_KEYS, load_spec
from envbuild.spec.smokelabels import DEFAULT, FLAG, LABEL, choose, smoke_labels

SPEC = """
[stack]
driver = "550"
framework = "torch==2.5.*"
gpus = ["H100"]

[smoke]
device = "cpu"
steps = 7
precision = "bf16"
timeout = 99
"""
NO_FLAGS = {setting.key: None for setting in SMOKE_SETTINGS}
IMAGE = "registry.example/team/train@sha256:" + "a" * 64


def spec_at(tmp_path: Path, text: str = SPEC):
    path = tmp_path / "envbuild.toml"
    path.write_text(text)
    return load_spec(str(path))


def label(key: str) -> str:
    return spec_smoke_label(key)


def test_every_smoke_setting_is_a_label_of_the_rendered_image(tmp_path: Path, matrix: Matrix) -> None:
    spec = spec_at(tmp_path)
    plan = build_plan(matrix, spec, spec.targets[0])
    written = dict(plan.labels)
    assert {key: written[label(key)] for key in ("device", "steps", "precision", "timeout")} == {
        "device": "cpu",
        "steps": "7",
        "precision": "bf16",
        "timeout": "99",
    }
    # one list; the user's checks (imports, command) travel in the image's smoke_checks.json instead
    assert set(TABLE_KEYS["smoke"]) == {setting.key for setting in SMOKE_SETTINGS} | {"imports", "command"}


def test_an_image_smokes_with_what_its_spec_said_when_no_flag_is_given(tmp_path: Path) -> None:
    # the bug: `verify IMAGE` of a precision = "bf16" image smoked in fp32
    chosen = choose(NO_FLAGS, smoke_labels(spec_at(tmp_path).smoke), IMAGE)
    assert chosen.values() == {"device": "cpu", "steps": 7, "precision": "bf16", "timeout": 99}
    assert {choice.source for choice in chosen.choices} == {LABEL} and chosen.warnings == ()
    assert chosen.document()["precision"] == {"value": "bf16", "from": "label"}


def test_a_flag_overrides_the_label_and_says_what_the_image_said(tmp_path: Path) -> None:
    chosen = choose({**NO_FLAGS, "steps": 3}, smoke_labels(spec_at(tmp_path).smoke), IMAGE)
    assert chosen.values()["steps"] == 3 and chosen.document()["steps"] == {"value": 3, "from": FLAG}
    assert "steps 3 (flag; the image says '7')" in chosen.describe()
    assert "precision bf16 (label)" in chosen.describe()


def test_an_image_without_the_labels_gets_the_defaults_without_a_warning() -> None:
    chosen = choose(NO_FLAGS, {"io.envbuild.framework": "torch"}, IMAGE)
    assert chosen.values() == {
        "device": "gpu",
        "steps": DEFAULT_STEPS,
        "precision": DEFAULT_PRECISION,
        "timeout": DEFAULT_TIMEOUT_S,
    }
    assert {choice.source for choice in chosen.choices} == {DEFAULT} and chosen.warnings == ()
    assert choose(NO_FLAGS, None, IMAGE).values() == chosen.values()  # labels that could not be read


@pytest.mark.parametrize(
    ("key", "text", "accepted"),
    [
        ("steps", "0", "expected a whole number from 1 to 10000"),
        ("steps", "10001", "expected a whole number from 1 to 10000"),
        ("steps", "abc", "expected a whole number from 1 to 10000"),
        ("steps", " 20", "expected a whole number from 1 to 10000"),  # int() would take these three
        ("steps", "2_0", "expected a whole number from 1 to 10000"),
        ("steps", "+20", "expected a whole number from 1 to 10000"),
        ("steps", "1e3", "expected a whole number from 1 to 10000"),
        ("timeout", "5", "expected a whole number from 10 to 86400"),
        ("timeout", "600.0", "expected a whole number from 10 to 86400"),
        ("precision", "fp64", "accepted: fp32, fp16, bf16"),
        ("precision", "bf16; rm -rf /", "accepted: fp32, fp16, bf16"),
        ("precision", "BF16", "accepted: fp32, fp16, bf16"),
        ("device", "tpu", "accepted: gpu, cpu"),
        ("device", "", "accepted: gpu, cpu"),
    ],
)
def test_a_label_the_spec_would_refuse_is_the_default_with_a_warning_naming_it(
    key: str, text: str, accepted: str
) -> None:
    labels = {**smoke_labels(load_default_smoke()), label(key): text}
    chosen = choose(NO_FLAGS, labels, IMAGE)
    (choice,) = [c for c in chosen.choices if c.key == key]
    (setting,) = [s for s in SMOKE_SETTINGS if s.key == key]
    assert (choice.value, choice.source) == (setting.default, DEFAULT)
    (warning,) = chosen.warnings
    assert f"the label {label(key)}={text!r}" in warning and accepted in warning, warning
    assert f"using the default {key} {setting.default} (or pass {setting.flag})" in warning
    # the other settings still come from their labels
    assert {c.source for c in chosen.choices if c.key != key} == {LABEL}


def load_default_smoke():
    from envbuild.spec.model import SmokeSpec

    return SmokeSpec(device="gpu", steps=5, precision="fp16", timeout=60, imports=(), command=None)


def test_a_label_that_is_no_text_or_very_long_is_refused_and_quoted_short() -> None:
    hostile = "bf16\x1b[2J" + "x" * 500
    chosen = choose(NO_FLAGS, {label("steps"): 20, label("precision"): hostile}, IMAGE)
    assert chosen.values()["steps"] == DEFAULT_STEPS and chosen.values()["precision"] == DEFAULT_PRECISION
    steps, precision = chosen.warnings
    assert "a label is text, and this is int" in steps
    assert "\x1b" not in precision and "\\x1b" in precision  # repr: no control character reaches a terminal
    assert "x" * 100 not in precision and precision.endswith("(or pass --precision)")  # cut short


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("steps", 1),
        ("steps", 10_000),
        ("steps", 0),
        ("timeout", 9),
        ("timeout", 86_400),
        ("precision", "fp8"),
    ],
)
def test_labels_and_the_spec_accept_exactly_the_same_values(tmp_path: Path, key: str, value: object) -> None:
    text = f'[stack]\ndriver = "550"\nframework = "torch"\n[smoke]\n{key} = {value!r}\n'.replace("'", '"')
    path = tmp_path / "envbuild.toml"
    path.write_text(text)
    try:
        spec_value = getattr(load_spec(str(path)).smoke, key)
    except UsageError:
        spec_value = None
    chosen = choose(NO_FLAGS, {label(key): str(value)}, IMAGE)
    (choice,) = [c for c in chosen.choices if c.key == key]
    label_value = choice.value if choice.source == LABEL else None
    assert spec_value == label_value


def test_the_list_codec_round_trips_and_leaves_what_is_no_json_list_to_the_rule() -> None:
    # for list settings ([smoke] imports): a JSON list in the label, judged by reader.strings
    assert STRINGS.parse(STRINGS.write(("transformers", "datasets"))) == ["transformers", "datasets"]
    assert STRINGS.parse("transformers") == "transformers"


def test_only_envbuild_writes_the_labels_a_spec_cannot_set_them(tmp_path: Path) -> None:
    text = SPEC + f'\n[image]\nlabels = {{ "{label("precision")}" = "fp32" }}\n'
    with pytest.raises(UsageError) as caught:
        spec_at(tmp_path, text)
    assert f"envbuild writes the {PREFIX}* labels itself" in caught.value.message


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv)[0].parse_args(argv)


def verify_args(*argv: str) -> argparse.Namespace:
    return parse("verify", IMAGE, *argv)


def test_verify_flags_not_given_are_none_so_the_label_decides() -> None:
    args = verify_args()
    assert (args.smoke_device, args.steps, args.precision, args.timeout) == (None, None, None, None)
    given = verify_args("--smoke-device", "cpu", "--steps", "4", "--precision", "fp16", "--timeout", "30")
    assert (given.smoke_device, given.steps, given.precision, given.timeout) == ("cpu", 4, "fp16", 30)
    # `envbuild smoke` keeps its own defaults: it runs on this host, with no image to read
    smoke = parse("smoke")
    assert smoke.steps is None and smoke.timeout == DEFAULT_TIMEOUT_S


def test_the_audit_gate_of_verify_judges_the_framework_the_image_label_names() -> None:
    # build's gate judges the plan's framework; verify IMAGE --gpu takes it from the image, validated
    assert framework_label({FRAMEWORK: "torch"}, IMAGE) == ("torch", None)
    assert framework_label({}, IMAGE) == (None, None)  # found from the libraries, as `envbuild audit`
    framework, warning = framework_label({FRAMEWORK: "torch; rm -rf /"}, IMAGE)
    assert framework is None and warning is not None
    assert f"ignoring the label {FRAMEWORK}='torch; rm -rf /': accepted: jax, tensorflow, torch" in warning
