"""Read and validate `envbuild.toml`: the team's description of its environment.

Every value is checked where it is read, and an error names the file, the table, the key, the value
given and what is accepted, so nothing invalid reaches a resolver or a template.
"""

from __future__ import annotations

import hashlib
import os

from envbuild._util import toml
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.matrix.model import COMPAT_MODES, STRATEGIES
from envbuild.smoke import DEFAULT_PRECISION, DEFAULT_STEPS, DEFAULT_TIMEOUT_S, DEVICES, PRECISIONS
from envbuild.spec import validate
from envbuild.spec.lockfile import LOCK_NAME

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

DEFAULT_TAG = "{target}-{framework}{framework_version}-cuda{cuda}-py{python}"
DEFAULT_USER = "envbuild"

STACK_KEYS = ("driver", "gpus", "python", "framework", "cuda", "compat", "strategy", "os")
TABLE_KEYS = {
    "stack": STACK_KEYS,
    "packages": ("pip", "apt", "conda", "index-url", "extra-index-urls", "framework-index-url"),
    "image": ("repository", "tags", "user", "labels", "env", "devel"),
    "smoke": ("device", "steps", "precision", "timeout"),
    "target": ("name", *STACK_KEYS),
}


class StackSpec(Record):
    __slots__ = ("driver", "gpus", "python", "framework", "cuda", "compat", "strategy", "os")
    driver: str
    gpus: tuple[str, ...]
    python: str | None
    framework: str
    cuda: str | None
    compat: str
    strategy: str
    os: str


class Packages(Record):
    __slots__ = ("pip", "apt", "conda", "index_url", "extra_index_urls", "framework_index_url")
    pip: tuple[str, ...]
    apt: tuple[str, ...]
    conda: tuple[str, ...]
    index_url: str | None
    extra_index_urls: tuple[str, ...]
    framework_index_url: str | None  # a mirror of the variant's index (download.pytorch.org/whl/cuXYZ)


class ImageSpec(Record):
    __slots__ = ("repository", "tags", "user", "labels", "env", "devel")
    repository: str
    tags: tuple[str, ...]
    user: str
    labels: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...]
    devel: bool


class SmokeSpec(Record):
    __slots__ = ("device", "steps", "precision", "timeout")
    device: str
    steps: int
    precision: str
    timeout: int


class Target(Record):
    __slots__ = ("name", "stack")
    name: str
    stack: StackSpec


class Spec(Record):
    __slots__ = ("path", "digest", "targets", "packages", "image", "smoke")
    path: str
    digest: str  # sha256 of the file's bytes
    targets: tuple[Target, ...]
    packages: Packages
    image: ImageSpec
    smoke: SmokeSpec

    def target(self, name: str | None) -> list[Target]:
        if name is None:
            return list(self.targets)
        for target in self.targets:
            if target.name == name:
                return [target]
        known = ", ".join(t.name for t in self.targets)
        raise UsageError(f"--target {name!r} is not a target of {self.path}", fix=f"use one of: {known}")


class _Reader:
    """Pulls typed, validated values out of the parsed TOML, remembering where they came from."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, key: str, value: Any, problem: str, fix: str | None = None) -> UsageError:
        return UsageError(
            f"{self.path}: {where} {key} = {value!r}: {problem}",
            fix=fix or f"edit {key} in {where} of {os.path.basename(self.path)}",
        )

    def check_keys(self, where: str, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
        import difflib

        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise UsageError(
                    f"{self.path}: {where} has an unknown key {key!r}",
                    fix=f"{hint}accepted keys: {', '.join(allowed)}",
                )

    def text(
        self,
        where: str,
        table: dict[str, Any],
        key: str,
        default: str | None = None,
        *,
        check: Callable[[str], str] | None = None,
        choices: tuple[str, ...] | None = None,
        required: bool = False,
    ) -> str | None:
        if key not in table:
            if required:
                raise UsageError(
                    f"{self.path}: {where} is missing the key {key!r}", fix=f'add {key} = "..." under {where}'
                )
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.fail(where, key, value, "expected a string")
        if choices is not None and value not in choices:
            raise self.fail(where, key, value, f"accepted: {', '.join(choices)}")
        try:  # a check owns its field's rules (a pip marker may hold ';'); the rest get the common ones
            return check(value) if check else validate.reject_metacharacters(value)
        except ValueError as exc:
            raise self.fail(where, key, value, str(exc)) from None

    def strings(
        self, where: str, table: dict[str, Any], key: str, check: Callable[[str], str] | None = None
    ) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, key, value, "expected a list of strings")
        cleaned = []
        for index, item in enumerate(value):
            try:
                cleaned.append(check(item) if check else validate.reject_metacharacters(item))
            except ValueError as exc:
                raise self.fail(where, f"{key}[{index}]", item, str(exc)) from None
        return tuple(cleaned)

    def mapping(
        self, where: str, table: dict[str, Any], key: str, check_key: Callable[[str], str]
    ) -> tuple[tuple[str, str], ...]:
        value = table.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(where, key, value, "expected a table of strings")
        items = []
        for name, item in sorted(value.items()):
            try:
                check_key(name)
            except ValueError as exc:
                raise self.fail(where, f"{key} key", name, str(exc)) from None
            if not isinstance(item, str):
                raise self.fail(where, f"{key}.{name}", item, "expected a string")
            try:
                items.append((name, validate.free_text(item)))
            except ValueError as exc:
                raise self.fail(where, f"{key}.{name}", item, str(exc)) from None
        return tuple(items)

    def integer(self, where: str, table: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(where, key, value, f"expected a whole number from {low} to {high}")
        return value

    def boolean(self, where: str, table: dict[str, Any], key: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(where, key, value, "expected true or false")
        return value

    def table(self, data: dict[str, Any], name: str) -> dict[str, Any]:
        value = data.get(name, {})
        if not isinstance(value, dict):
            raise UsageError(f"{self.path}: [{name}] must be a table", fix=f"write it as [{name}]")
        self.check_keys(f"[{name}]", value, TABLE_KEYS[name])
        return value

    def stack(self, where: str, table: dict[str, Any], base: StackSpec | None) -> StackSpec:
        def pick(key: str, default: Any, **kwargs: Any) -> Any:
            if key in table:
                return self.text(where, table, key, **kwargs)
            return default

        if base is None:
            driver = self.text(where, table, "driver", required=True)
            framework = self.text(where, table, "framework", required=True)
            return StackSpec(
                driver=driver,
                gpus=self.strings(where, table, "gpus"),
                python=self.text(where, table, "python"),
                framework=framework,
                cuda=self.text(where, table, "cuda"),
                compat=self.text(where, table, "compat", "native", choices=COMPAT_MODES),
                strategy=self.text(where, table, "strategy", "wheels", choices=STRATEGIES),
                os=self.text(where, table, "os", "ubuntu22.04"),
            )
        return StackSpec(
            driver=pick("driver", base.driver),
            gpus=self.strings(where, table, "gpus") if "gpus" in table else base.gpus,
            python=pick("python", base.python),
            framework=pick("framework", base.framework),
            cuda=pick("cuda", base.cuda),
            compat=pick("compat", base.compat, choices=COMPAT_MODES),
            strategy=pick("strategy", base.strategy, choices=STRATEGIES),
            os=pick("os", base.os),
        )


def load_spec(path: str) -> Spec:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise UsageError(
            f"spec file {path} does not exist",
            fix="run `envbuild init` to write a starter envbuild.toml, or pass -f PATH",
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot read spec file {path}: {exc.strerror}") from None

    try:
        data = toml.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, toml.TOMLDecodeError) as exc:
        raise UsageError(
            f"{path} is not valid TOML: {exc}", fix="fix the syntax at the position named above"
        ) from None
    return parse_spec(data, path, hashlib.sha256(raw).hexdigest())


def parse_spec(data: dict[str, Any], path: str, digest: str) -> Spec:
    reader = _Reader(path)
    reader.check_keys("the top level", data, ("stack", "packages", "image", "smoke", "target"))
    stack_table = reader.table(data, "stack")
    if not stack_table:
        raise UsageError(
            f"{path}: the [stack] table is missing or empty",
            fix='add [stack] with at least driver = "550" and framework = "torch"',
        )
    stack = reader.stack("[stack]", stack_table, None)

    packages_table = reader.table(data, "packages")
    packages = Packages(
        pip=reader.strings("[packages]", packages_table, "pip", validate.pip_requirement),
        apt=reader.strings("[packages]", packages_table, "apt", validate.apt_package),
        conda=reader.strings("[packages]", packages_table, "conda", validate.conda_spec),
        index_url=reader.text("[packages]", packages_table, "index-url", check=validate.url),
        extra_index_urls=reader.strings("[packages]", packages_table, "extra-index-urls", validate.url),
        framework_index_url=reader.text(
            "[packages]", packages_table, "framework-index-url", check=validate.url
        ),
    )

    image_table = reader.table(data, "image")
    tags = reader.strings("[image]", image_table, "tags", validate.tag_template) or (DEFAULT_TAG,)
    image = ImageSpec(
        repository=reader.text(
            "[image]", image_table, "repository", "envbuild/train", check=validate.repository
        ),
        tags=tags,
        user=reader.text("[image]", image_table, "user", DEFAULT_USER, check=validate.user_name),
        labels=reader.mapping("[image]", image_table, "labels", validate.label_key),
        env=reader.mapping("[image]", image_table, "env", validate.env_name),
        devel=reader.boolean("[image]", image_table, "devel", False),
    )

    smoke_table = reader.table(data, "smoke")
    smoke = SmokeSpec(
        device=reader.text("[smoke]", smoke_table, "device", "gpu", choices=DEVICES),
        steps=reader.integer("[smoke]", smoke_table, "steps", DEFAULT_STEPS, 1, 10_000),
        precision=reader.text("[smoke]", smoke_table, "precision", DEFAULT_PRECISION, choices=PRECISIONS),
        timeout=reader.integer("[smoke]", smoke_table, "timeout", DEFAULT_TIMEOUT_S, 10, 86_400),
    )

    targets_raw = data.get("target", [])
    if not isinstance(targets_raw, list):
        raise UsageError(
            f"{path}: target must be an array of tables [[target]]",
            fix="write each target as [[target]] with a name",
        )
    targets = []
    for index, entry in enumerate(targets_raw):
        where = f"[[target]] #{index + 1}"
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: {where} must be a table", fix="write it as [[target]]")
        reader.check_keys(where, entry, TABLE_KEYS["target"])
        name = reader.text(where, entry, "name", required=True, check=validate.target_name)
        if name in (os.path.basename(path), LOCK_NAME):  # `render -o .` would put a context in its place
            raise UsageError(
                f"{path}: {where} name = {name!r} is the name of the spec or its lock, and a target's "
                "build context is written to a directory of its name",
                fix="give the target another name",
            )
        targets.append(Target(name=name, stack=reader.stack(f"[[target]] {name!r}", entry, stack)))
    if not targets:
        targets.append(Target(name="default", stack=stack))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(
            f"{path}: target name {duplicates[0]!r} is used twice", fix="give every [[target]] a unique name"
        )
    return Spec(
        path=os.path.abspath(path),
        digest=digest,
        targets=tuple(targets),
        packages=packages,
        image=image,
        smoke=smoke,
    )
