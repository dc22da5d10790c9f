"""The spec's [smoke] settings as image labels: render writes them, `envbuild verify IMAGE` reads them.

`envbuild build` has the spec at hand and smokes with its settings; `envbuild verify IMAGE` on another
machine (a GPU runner, a Slurm node) has only the image, and used to smoke a `precision = "bf16"` image
in fp32. So render writes each setting of spec.model.SMOKE_SETTINGS into a label,
io.envbuild.spec.smoke.<key>, and verify takes, setting by setting, its flag, else the image's label,
else the default, and says which (SmokeChoice).

A label is untrusted input: anyone can build an image with any labels. Each value is parsed by its
setting's codec and judged by the spec's own rule (SmokeSetting.read, the code that reads envbuild.toml);
one that fails is replaced by the default, with a warning naming the label. Render writes labels only
from a SmokeSpec, whose fields the spec's reader has already validated.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.oci.labels import spec_smoke_label
from envbuild.spec.model import SMOKE_SETTINGS, SmokeSetting, SmokeSpec, judge_setting

if TYPE_CHECKING:
    from typing import Any

FLAG, LABEL, DEFAULT = "flag", "label", "default"  # where a setting's value came from
_SHOWN = 60  # characters of an invalid label's value a warning quotes


def smoke_labels(smoke: SmokeSpec) -> dict[str, str]:
    """The labels render writes into the image: one per [smoke] setting, from the validated spec."""
    return {
        spec_smoke_label(setting.key): setting.codec.write(getattr(smoke, setting.field))
        for setting in SMOKE_SETTINGS
    }


class Choice(Record):
    """One setting as verify will use it. source: FLAG, LABEL or DEFAULT. label: the image's label text
    when it has one (shown beside a flag that overrides it), else None."""

    __slots__ = ("key", "field", "value", "source", "label")
    key: str
    field: str
    value: Any
    source: str
    label: str | None


class SmokeChoice(Record):
    """Every setting, in SMOKE_SETTINGS order, and the warnings about labels that were refused."""

    __slots__ = ("choices", "warnings")
    choices: tuple[Choice, ...]
    warnings: tuple[str, ...]

    def values(self) -> dict[str, Any]:
        """{field: value}: the keyword arguments of image.verify.verify_image / runtime.verify."""
        return {choice.field: choice.value for choice in self.choices}

    def document(self) -> dict[str, dict[str, Any]]:
        """{key: {"value", "from"}}: what the verify record keeps."""
        return {choice.key: {"value": choice.value, "from": choice.source} for choice in self.choices}

    def describe(self) -> str:
        """One line for a terminal: `device gpu (label), steps 5 (flag; the image says 20), ...`."""
        parts = []
        for choice in self.choices:
            overridden = choice.source == FLAG and choice.label is not None
            says = f"; the image says {_shown(choice.label)}" if overridden else ""
            parts.append(f"{choice.key} {choice.value} ({choice.source}{says})")
        return ", ".join(parts)


def choose(flags: dict[str, Any], labels: dict[str, object] | None, image: str) -> SmokeChoice:
    """Each setting from `flags` ({key: value, None when the flag was not given}), else the image's
    label in `labels` (None: they could not be read), else its default."""
    labels = labels or {}
    choices, warnings = [], []
    for setting in SMOKE_SETTINGS:
        name = spec_smoke_label(setting.key)
        text = labels.get(name)
        shown = text if isinstance(text, str) else None
        value, source = setting.default, DEFAULT
        if flags.get(setting.key) is not None:
            value, source = flags[setting.key], FLAG
        elif text is not None:
            try:
                value, source = _from_label(setting, text, image), LABEL
            except UsageError as exc:
                warnings.append(
                    f"{image}: ignoring the label {name}={_shown(text)}: {exc.message}; "
                    f"using the default {setting.key} {setting.default}"
                    + (f" (or pass {setting.flag})" if setting.flag else "")
                )
        choices.append(Choice(key=setting.key, field=setting.field, value=value, source=source, label=shown))
    return SmokeChoice(choices=tuple(choices), warnings=tuple(warnings))


def _from_label(setting: SmokeSetting, text: object, image: str) -> Any:
    """The label's value by the spec's rule, or a UsageError saying what is accepted."""
    if not isinstance(text, str):
        raise UsageError(f"a label is text, and this is {type(text).__name__}")
    parsed = setting.codec.parse(text)
    try:
        return judge_setting(setting, parsed, image, "label")
    except UsageError as exc:  # "IMAGE: label KEY = VALUE: what is accepted": keep what is accepted
        prefix = f"{image}: label {setting.key} = {parsed!r}: "
        message = exc.message[len(prefix) :] if exc.message.startswith(prefix) else exc.message
        raise UsageError(message) from None


def _shown(value: object) -> str:
    """An untrusted label's value for a terminal: repr (no control characters reach it), cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
