"""BuildSettings: how `envbuild build` runs, one frozen value built with one precedence rule.

Each setting comes from the first layer that gives it: its flag, then its ENVBUILD_* variable, then
envbuild.toml, then envbuild's default. This is cibuildwheel's options layering: a CI job sets
ENVBUILD_PUSH=1 or ENVBUILD_BASE_IMAGE=<mirror> once for every build step, a team writes the smoke
device in envbuild.toml, and a flag on one command line wins over both. The layers are read once,
here: the stages read `settings.push`, never the environment, and `sources` says where each value came
from, so a bad value is an error that names the flag or the variable the user actually set.

The rules are one table (RULES); a setting added to `envbuild build` is a row there and a field below.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.engine import ENGINES
from envbuild.engine.cdi import GPU_ACCESS
from envbuild.errors import UsageError
from envbuild.smoke import DEVICES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from envbuild.audit.skip import AuditSkip
    from envbuild.spec.model import Spec

BUILDERS = ("auto", "api", "buildkit")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")  # a CI secret that is not defined expands to ""


class Rule(Record):
    """One setting's layers: its flag (None: none), its ENVBUILD_* variable, what envbuild.toml says
    (a function of the spec, None: nothing), its default, and how a variable's text becomes a value
    (ValueError: not accepted; `accepted` says what is)."""

    __slots__ = ("name", "flag", "env", "spec", "default", "parse", "accepted", "example")
    name: str
    flag: str
    env: str
    spec: Callable[[Spec], object] | None
    default: object
    parse: Callable[[str], object]
    accepted: str
    example: str


def _boolean(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(text)


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return parse


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _text(text: str) -> str:
    if not text.strip() or len(text) > 4096 or any(ord(c) < 32 for c in text):
        raise ValueError(text)
    return text


def _reference(text: str) -> str:
    from envbuild.oci.reference import parse_reference

    try:
        parse_reference(_text(text))
    except UsageError:
        raise ValueError(text) from None
    return text


def _directory(text: str) -> str:
    import os

    if not os.path.isdir(_text(text)):
        raise ValueError(text)
    return text


RULES: tuple[Rule, ...] = (
    Rule(
        name="out_dir",
        flag="-o",
        env="ENVBUILD_OUTPUT",
        spec=None,
        default="build",
        parse=_text,
        accepted="a directory",
        example="build",
    ),
    Rule(
        name="engine",
        flag="--engine",
        env="ENVBUILD_ENGINE",
        spec=lambda spec: spec.build.engine,  # [build] engine
        default="docker",
        parse=_choice(ENGINES),
        accepted=" or ".join(ENGINES),
        example="podman",
    ),
    Rule(
        name="builder",
        flag="--builder",
        env="ENVBUILD_BUILDER",
        spec=None,
        default="auto",
        parse=_choice(BUILDERS),
        accepted=", ".join(BUILDERS),
        example="buildkit",
    ),
    Rule(
        name="smoke_device",
        flag="--smoke-device",
        env="ENVBUILD_SMOKE_DEVICE",
        spec=lambda spec: spec.smoke.device,  # [smoke] device, or the spec's own default (gpu)
        default="gpu",
        parse=_choice(tuple(DEVICES)),
        accepted="cpu or gpu",
        example="cpu",
    ),
    Rule(
        name="gpu_access",
        flag="--gpu-access",
        env="ENVBUILD_GPU_ACCESS",
        spec=None,
        default="auto",
        parse=_choice(GPU_ACCESS),
        accepted=", ".join(GPU_ACCESS),
        example="cdi",
    ),
    Rule(
        name="push",
        flag="--push",
        env="ENVBUILD_PUSH",
        spec=None,
        default=False,
        parse=_boolean,
        accepted="1, true, yes, on, or 0, false, no, off",
        example="1",
    ),
    Rule(
        name="base_image",
        flag="--base-image",
        env="ENVBUILD_BASE_IMAGE",
        spec=None,
        default=None,
        parse=_reference,
        accepted="an image reference",
        example="registry.example.com/nvidia/cuda:12.8.1-runtime-ubuntu24.04",
    ),
    Rule(
        name="wheelhouse",
        flag="--wheelhouse",
        env="ENVBUILD_WHEELHOUSE",
        spec=None,
        default=None,
        parse=_directory,
        accepted="an existing directory of wheels",
        example="/srv/wheels",
    ),
    Rule(
        name="bundle",
        flag="--bundle",
        env="ENVBUILD_BUNDLE",
        spec=None,
        default=None,
        parse=_directory,
        accepted="an existing bundle directory (`envbuild vendor` writes one)",
        example="/media/usb/envbuild-bundle",
    ),
    Rule(
        name="no_cache",
        flag="--no-cache",
        env="ENVBUILD_NO_CACHE",
        spec=None,
        default=False,
        parse=_boolean,
        accepted="1, true, yes, on, or 0, false, no, off",
        example="1",
    ),
    Rule(
        name="jobs",
        flag="-j",
        env="ENVBUILD_JOBS",
        spec=None,
        default=1,
        parse=_count,
        accepted="a whole number, 1 or more",
        example="2",
    ),
)


class BuildSettings(Record):
    """How `envbuild build` runs (see the module docstring). `sources`: {setting: where its value came
    from}, a flag ("--push"), a variable ("ENVBUILD_PUSH"), "envbuild.toml" or "default". The lock
    key and the signing key are read where their files are (lockfile.seal.lock_key: --lock-key-file,
    then ENVBUILD_LOCK_KEY), and skip_audit is the spec's [audit] skip with the flags' on top."""

    __slots__ = (
        "out_dir",
        "engine",
        "builder",
        "smoke_device",
        "gpu_access",
        "push",
        "base_image",
        "wheelhouse",
        "bundle",
        "no_cache",
        "jobs",
        "lock_key",
        "allow_edited_lock",
        "sign_key",
        "skip_audit",
        "sources",
    )
    out_dir: str
    engine: str  # docker | podman: the container engine every stage uses (envbuild.engine)
    builder: str  # auto | api | buildkit (Podman: auto, which is `podman build`)
    smoke_device: str  # cpu | gpu
    gpu_access: str  # auto | legacy | cdi: how a GPU smoke step reaches the GPUs (envbuild.engine.cdi)
    push: bool
    base_image: str | None
    wheelhouse: str | None
    bundle: str | None  # air-gapped from a bundle (render.bundle): its wheels/ becomes the wheelhouse
    no_cache: bool
    jobs: int
    lock_key: bytes | None  # the HMAC key a sealed lock is checked with (lockfile.seal)
    allow_edited_lock: bool  # build from a lock whose seal fails, with a warning: emergencies only
    sign_key: str | None  # a PEM key: the attached SBOM and provenance are DSSE envelopes it signed
    skip_audit: tuple[AuditSkip, ...]  # the spec's [audit] skip, a flag's replacing one of its library
    sources: dict[str, str]


def rule_named(name: str) -> Rule:
    """The RULES row of setting `name`: the commands beside build (verify, doctor, promote) layer their
    --engine and --gpu-access with the same row, so every command reads ENVBUILD_ENGINE alike."""
    return next(rule for rule in RULES if rule.name == name)


def layered(rule: Rule, flag: object, env: Mapping[str, str], spec: Spec | None) -> tuple[object, str]:
    """(value, source) of one setting: its flag when given, else its variable when set, else the
    spec's value, else the default. A variable that does not parse is a UsageError naming it."""
    if flag is not None:
        return flag, rule.flag
    text = env.get(rule.env)
    if text is not None and text.strip():
        try:
            return rule.parse(text.strip()), rule.env
        except ValueError:
            raise UsageError(
                f"{rule.env}={text.strip()[:80]!r} is not {rule.accepted}",
                fix=f"set it to {rule.accepted} (e.g. {rule.env}={rule.example}), or unset it",
            ) from None
    if rule.spec is not None and spec is not None:
        value = rule.spec(spec)
        if value is not None:
            return value, "envbuild.toml"
    return rule.default, "default"


def build_settings(
    flags: Mapping[str, object],
    spec: Spec | None,
    env: Mapping[str, str],
    *,
    lock_key: bytes | None = None,
    allow_edited_lock: bool = False,
    sign_key: str | None = None,
    skip_audit: tuple[AuditSkip, ...] = (),
) -> BuildSettings:
    """The settings of one `envbuild build`: `flags` holds each rule's flag value, None where the
    flag was not given."""
    from envbuild.audit.skip import merge

    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for rule in RULES:
        values[rule.name], sources[rule.name] = layered(rule, flags.get(rule.name), env, spec)
    if values["bundle"] is not None and values["wheelhouse"] is not None:
        raise UsageError(
            f"{sources['bundle']} and {sources['wheelhouse']} both give the wheels: a bundle's wheels/ "
            "is its wheelhouse",
            fix=f"drop {sources['wheelhouse']} (the bundle's wheels/ is used), or drop {sources['bundle']}",
        )
    if int(values["jobs"]) < 1:  # type: ignore[call-overload]
        raise UsageError(f"-j {values['jobs']} must be 1 or more", fix="e.g. -j 2")
    return BuildSettings(
        **values,
        lock_key=lock_key,
        allow_edited_lock=allow_edited_lock,
        sign_key=sign_key,
        skip_audit=merge(spec.audit_skip if spec is not None else (), skip_audit),
        sources=sources,
    )
