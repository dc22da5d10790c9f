"""Read and validate `envbuild.toml`: the team's description of its environment.

Every value is checked where it is read, and an error names the file, the table, the key, the value
given and what is accepted, so nothing invalid reaches a resolver or a template.
"""

from __future__ import annotations

import json
import os
import re

from envbuild._util import toml
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit import skip as skipping
from envbuild.errors import UsageError
from envbuild.matrix import platforms
from envbuild.matrix.model import COMPAT_MODES, STRATEGIES
from envbuild.smoke import (
    DEFAULT_PRECISION,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT_S,
    DEVICES,
    MAX_IMPORTS,
    PRECISIONS,
    STEPS_RANGE,
    TIMEOUT_RANGE_S,
)
from envbuild.spec import validate
from envbuild.spec.digest import spec_digest
from envbuild.spec.keys import (  # the keys' declarations; the constants are re-exported for the readers
    DEFAULT_CONDA_CHANNELS,
    DEFAULT_OS,
    DEFAULT_REPOSITORY,
    DEFAULT_TAG,
    DEFAULT_USER,
    ENGINES,
    INSTALLERS,
    PYTHON_SOURCES,
    SKIP_KEYS,
    TABLE_KEYS,
    TOP_LEVEL,
)
from envbuild.spec.mirrors import MAX_MIRRORS, NO_MIRRORS, Mirrors, check_entry, make_mirrors

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

# the lock file `envbuild lock` writes next to envbuild.toml: a team commits both, and no target's
# output may take its name (envbuild.lockfile, above spec, reads the name from here)
LOCK_NAME = "envbuild.lock"


class LabelCodec(Record):
    """How a [smoke] value travels in an image label's text: `write` gives the text render puts in the
    Dockerfile, `parse` turns a label's text back into what TOML would have given, or leaves the text
    as it is when it cannot, so that the spec's own rule (SmokeSetting.read) refuses it, in its words."""

    __slots__ = ("write", "parse")
    write: Callable[[Any], str]
    parse: Callable[[str], Any]


def _whole_or_text(text: str) -> Any:
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else text  # int() would take " 2_0 "


def _list_or_text(text: str) -> Any:
    try:
        return parse_json(text)
    except ValueError:
        return text


TEXT = LabelCodec(write=str, parse=str)
WHOLE = LabelCodec(write=str, parse=_whole_or_text)
STRINGS = LabelCodec(write=lambda value: json.dumps(list(value)), parse=_list_or_text)  # a JSON list


class SmokeSetting(Record):
    """One [smoke] setting, read by one rule whether it comes from the spec or from an image's label.

    key: the [smoke] key, and the last part of the image's label (oci.labels.spec_smoke_label); its
    SmokeSpec field is `field`. flag: the `envbuild verify` option that overrides it (None: none does).
    default: when neither the spec nor the image says. rule(reader, where, table, key, default): the
    spec's rule for it (read). codec: how a label's text carries it."""

    __slots__ = ("key", "flag", "default", "rule", "codec")
    key: str
    flag: str | None
    default: Any
    rule: Callable[[_Reader, str, dict[str, Any], str, Any], Any]
    codec: LabelCodec

    @property
    def field(self) -> str:
        return self.key.replace("-", "_")

    def read(self, reader: _Reader, where: str, table: dict[str, Any]) -> Any:
        """The value under `key` in `table` by the spec's rule (the default when absent), or a
        UsageError naming `where`, the key and what is accepted."""
        return self.rule(reader, where, table, self.key, self.default)


def one_of(choices: tuple[str, ...]) -> Callable[..., Any]:
    return lambda reader, where, table, key, default: reader.text(where, table, key, default, choices=choices)


def whole(low: int, high: int) -> Callable[..., Any]:
    return lambda reader, where, table, key, default: reader.integer(where, table, key, default, low, high)


# The [smoke] table, one row a setting: the spec reads it, render writes each into a label of the image
# (spec.smokelabels), and `envbuild verify IMAGE` reads it back by the same rule. A new setting is one
# row here and its SmokeSpec field (a list of strings: codec=STRINGS and a rule calling reader.strings).
SMOKE_SETTINGS = (
    SmokeSetting(key="device", flag="--smoke-device", default="gpu", rule=one_of(DEVICES), codec=TEXT),
    SmokeSetting(key="steps", flag="--steps", default=DEFAULT_STEPS, rule=whole(*STEPS_RANGE), codec=WHOLE),
    SmokeSetting(
        key="precision", flag="--precision", default=DEFAULT_PRECISION, rule=one_of(PRECISIONS), codec=TEXT
    ),
    SmokeSetting(
        key="timeout", flag="--timeout", default=DEFAULT_TIMEOUT_S, rule=whole(*TIMEOUT_RANGE_S), codec=WHOLE
    ),
)



class StackSpec(Record):
    __slots__ = (
        "driver",
        "gpus",
        "python",
        "framework",
        "cuda",
        "compat",
        "strategy",
        "os",
        "python_source",
        "platforms",
    )
    driver: str
    gpus: tuple[str, ...]
    python: str | None
    framework: str
    cuda: str | None
    compat: str
    strategy: str
    os: str
    python_source: str  # system (the OS's python3 only) | deadsnakes (the opt-in to Ubuntu's PPA)
    # `platform = "linux/arm64"` or a list: canonical names (matrix.platforms), in the spec's order.
    # Empty: not set, so resolve derives it from the GPUs (a Grace GPU means linux/arm64), else amd64.
    platforms: tuple[str, ...]


class Packages(Record):
    __slots__ = (
        "pip",
        "apt",
        "conda",
        "conda_channels",
        "index_url",
        "extra_index_urls",
        "framework_index_url",
    )
    pip: tuple[str, ...]
    apt: tuple[str, ...]
    conda: tuple[str, ...]
    # names (anaconda.org) or URLs (a channel, or a team's mirror of one), highest priority first; the
    # conda strategy's solve reads them (default DEFAULT_CONDA_CHANNELS)
    conda_channels: tuple[str, ...]
    index_url: str | None
    extra_index_urls: tuple[str, ...]
    framework_index_url: str | None  # a mirror of the variant's index (download.pytorch.org/whl/cuXYZ)


class ImageSpec(Record):
    __slots__ = ("repository", "tags", "user", "labels", "env", "devel", "installer")
    repository: str
    tags: tuple[str, ...]
    user: str
    labels: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...]
    devel: bool
    installer: str  # uv | pip (INSTALLERS)


class SmokeSpec(Record):
    __slots__ = ("device", "steps", "precision", "timeout", "imports", "command")
    device: str
    steps: int
    precision: str
    timeout: int
    # the user's own checks, run in the image after the training step (smoke_common.run_checks): modules
    # to import, and one command line (run without a shell); the image carries them (smoke.checks_file)
    imports: tuple[str, ...]
    command: str | None


class BuildSpec(Record):
    """[build]: how the team's images are built, where envbuild.toml says (a flag or an ENVBUILD_*
    variable wins over it: stages.settings)."""

    __slots__ = ("engine",)
    engine: str | None  # docker | podman (ENGINES); None: not said


class SiteSpec(Record):
    """[site]: what a site sets once for every command and every generated CI file, in place of a flag
    on each: `matrix` (a team's extended copy of matrix/, relative to envbuild.toml) and `base-image`
    (the base every target builds on, as --base-image would set it; a flag still wins)."""

    __slots__ = ("matrix", "base_image")
    matrix: str | None  # an absolute path, resolved against the spec's directory; None: not said
    base_image: str | None


NO_SITE = SiteSpec(matrix=None, base_image=None)


class Target(Record):
    __slots__ = ("name", "stack")
    name: str
    stack: StackSpec


class Spec(Record):
    __slots__ = (
        "path",
        "digest",
        "targets",
        "packages",
        "image",
        "smoke",
        "audit_skip",
        "build",
        "mirrors",
        "site",
    )
    path: str
    digest: str  # sha256 of the file's bytes less [mirrors] and [site] (spec.digest)
    targets: tuple[Target, ...]
    packages: Packages
    image: ImageSpec
    smoke: SmokeSpec
    # [audit] skip = [{library = "libtorch_cuda.so", reason = "..."}]: libraries the team decided the
    # audit does not judge (envbuild.audit.skip), for every target; a --skip-audit flag adds to them
    audit_skip: tuple[skipping.AuditSkip, ...]
    build: BuildSpec
    mirrors: Mirrors  # [mirrors]: canonical source prefix -> the site's mirror (spec.mirrors)
    site: SiteSpec

    def __init__(
        self,
        *,
        path: str,
        digest: str,
        targets: tuple[Target, ...],
        packages: Packages,
        image: ImageSpec,
        smoke: SmokeSpec,
        audit_skip: tuple[skipping.AuditSkip, ...] = (),
        build: BuildSpec | None = None,
        mirrors: Mirrors = NO_MIRRORS,
        site: SiteSpec = NO_SITE,
    ) -> None:
        super().__init__(
            path=path,
            digest=digest,
            targets=targets,
            packages=packages,
            image=image,
            smoke=smoke,
            audit_skip=audit_skip,
            build=build or BuildSpec(engine=None),
            mirrors=mirrors,
            site=site,
        )

    def target(self, name: str | None) -> list[Target]:
        if name is None:
            return list(self.targets)
        for target in self.targets:
            if target.name == name:
                return [target]
        known = ", ".join(t.name for t in self.targets)
        raise UsageError(f"--target {name!r} is not a target of {self.path}", fix=f"use one of: {known}")


def _shown(value: Any, *, quoted: bool = True) -> str:
    """`value` as an error quotes it (its repr; `quoted=False`: a key, as written), cut to its first
    80 characters when longer than 200 (a 1 MB value is named by its length, not printed whole into a
    terminal or a CI log)."""
    text = repr(value) if quoted else str(value)
    if len(text) <= 200:
        return text
    return f"{text[:80]}… ({len(value) if isinstance(value, str) else len(text):,} characters)"


class _Reader:
    """Pulls typed, validated values out of the parsed TOML, remembering where they came from.

    A bad value is recorded, not raised, and reading goes on with a stand-in: one run reports every
    problem in the file (`finish`), so a newcomer fixes them in one edit, not one per run."""

    def __init__(self, path: str, source: str = "") -> None:
        self.path = path
        self.source = source  # the file's text: a number's literal as written (3.10, not 3.1)
        self.problems: list[UsageError] = []

    def fail(self, where: str, key: str, value: Any, problem: str, fix: str | None = None) -> UsageError:
        return UsageError(
            f"{self.path}: {where} {_shown(key, quoted=False)} = {_shown(value)}: {problem}",
            fix=fix or f"edit {key} in {where} of {os.path.basename(self.path)}",
        )

    def bounded(self, where: str, key: str, value: str) -> None:
        """A UsageError when `value` is longer than a field may be (validate.check_length), before any
        check reads it: the error names the field and the limit, and quotes only the value's start."""
        try:
            validate.check_length(value)
        except ValueError as exc:
            raise self.fail(where, key, value, str(exc), fix=f"shorten {key} in {where}") from None

    def attempt(self, read: Callable[[], T], fallback: T) -> T:
        """read(), or `fallback` with the problem recorded."""
        try:
            return read()
        except UsageError as exc:
            self.problems.append(exc)
            return fallback

    def finish(self) -> None:
        """Raise every recorded problem as one UsageError (one problem: that problem, unchanged)."""
        if len(self.problems) == 1:
            raise self.problems[0]
        if self.problems:
            lines = [f"{self.path} has {len(self.problems)} problems:"]
            for problem in self.problems:
                lines.append(f"  - {problem.message}")
                if problem.fix:
                    lines.append(f"    fix: {problem.fix}")
            raise UsageError(
                "\n".join(lines), fix=f"correct each key named above in {os.path.basename(self.path)}"
            )

    def literal(self, key: str, value: Any) -> str:
        """A number as the file spells it: TOML reads `python = 3.10` as the float 3.1, and the fix
        must say "3.10"."""
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=\s*([-+0-9][0-9_.eE+-]*)\s*(#.*)?$")
        for line in self.source.splitlines():
            match = pattern.match(line)
            if match:
                try:
                    if float(match.group(1).replace("_", "")) == float(value):
                        return match.group(1)
                except ValueError:
                    continue
        return repr(value)

    def quote_hint(self, where: str, key: str, value: Any) -> UsageError | None:
        """For a number where a string belongs: the error that says how to quote it."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        written = self.literal(key, value)
        return self.fail(
            where,
            key,
            value,
            f"expected a string, and TOML reads {written} unquoted as a number",
            fix=f'use {key} = "{written}" (quoted)',
        )

    def check_keys(self, where: str, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
        import difflib

        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1) if len(key) <= 200 else []
                hint = f"did you mean {close[0]!r}? " if close else ""
                self.problems.append(
                    UsageError(
                        f"{self.path}: {where} has an unknown key {_shown(key)}",
                        fix=f"{hint}accepted keys: {', '.join(allowed)}",
                    )
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
        fix: str | None = None,
    ) -> str | None:
        if key not in table:
            if required:
                raise UsageError(
                    f"{self.path}: {where} is missing the key {key!r}", fix=f'add {key} = "..." under {where}'
                )
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.quote_hint(where, key, value) or self.fail(where, key, value, "expected a string")
        self.bounded(where, key, value)
        if choices is not None and value not in choices:
            raise self.fail(where, key, value, f"accepted: {', '.join(choices)}")
        try:  # a check owns its field's rules (a pip marker may hold ';'); the rest get the common ones
            return check(value) if check else validate.reject_metacharacters(value)
        except ValueError as exc:
            raise self.fail(where, key, value, str(exc), fix=fix) from None

    def strings(
        self,
        where: str,
        table: dict[str, Any],
        key: str,
        check: Callable[[str], str] | None = None,
        *,
        fix: str | None = None,
        most: int | None = None,
    ) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            hint = fix
            if isinstance(value, list) and all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
            ):
                quoted = ", ".join(
                    f'"{v}"' if isinstance(v, str) else f'"{self.literal_in_list(key, v)}"' for v in value
                )
                hint = f"use {key} = [{quoted}] (each item quoted)"
            raise self.fail(where, key, value, "expected a list of strings", fix=hint)
        if most is not None and len(value) > most:
            raise self.fail(where, key, value, f"lists {len(value)} items, and at most {most} are accepted")
        cleaned = []
        for index, item in enumerate(value):
            self.bounded(where, f"{key}[{index}]", item)
            try:
                cleaned.append(check(item) if check else validate.reject_metacharacters(item))
            except ValueError as exc:
                raise self.fail(where, f"{key}[{index}]", item, str(exc), fix=fix) from None
        return tuple(cleaned)

    def literal_in_list(self, key: str, value: float) -> str:
        """A number in `key = [...]` as the file spells it (9.0 stays 9.0, 8.10 stays 8.10)."""
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=\s*\[(.*)\]")
        for line in self.source.splitlines():
            match = pattern.match(line)
            for token in (t.strip() for t in match.group(1).split(",")) if match else ():
                try:
                    if float(token.strip("'\"")) == float(value):
                        return token.strip("'\"")
                except ValueError:
                    continue
        return repr(value)

    def mapping(
        self, where: str, table: dict[str, Any], key: str, check_key: Callable[[str], str]
    ) -> tuple[tuple[str, str], ...]:
        value = table.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(where, key, value, "expected a table of strings")
        items = []
        for name, item in sorted(value.items()):
            self.bounded(where, f"{key} key", name)
            if isinstance(item, str):
                self.bounded(where, f"{key}.{_shown(name, quoted=False)}", item)
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
            self.problems.append(
                UsageError(f"{self.path}: [{name}] must be a table", fix=f"write it as [{name}]")
            )
            return {}
        self.check_keys(f"[{name}]", value, TABLE_KEYS[name])
        return value

    def stack(self, where: str, table: dict[str, Any], base: StackSpec | None) -> StackSpec:
        """[stack] (base None: its defaults) or a [[target]]'s overrides of `base`."""

        def pick(key: str, default: Any, **kwargs: Any) -> Any:
            if key in table:
                return self.attempt(lambda: self.text(where, table, key, **kwargs), default)
            return default

        if base is None:
            base = StackSpec(
                driver="",
                gpus=(),
                python=None,
                framework="",
                cuda=None,
                compat="native",
                strategy="wheels",
                os=DEFAULT_OS,
                python_source="system",
                platforms=(),
            )
            for key in ("driver", "framework"):
                if key not in table:
                    self.problems.append(
                        UsageError(
                            f"{self.path}: {where} is missing the key {key!r}",
                            fix=f'add {key} = "..." under {where}',
                        )
                    )
        return StackSpec(
            driver=pick("driver", base.driver),
            gpus=self.attempt(lambda: self.strings(where, table, "gpus"), ())
            if "gpus" in table
            else base.gpus,
            python=pick("python", base.python),
            framework=pick("framework", base.framework),
            cuda=pick("cuda", base.cuda),
            compat=pick("compat", base.compat, choices=COMPAT_MODES),
            strategy=pick("strategy", base.strategy, choices=STRATEGIES),
            os=pick("os", base.os),
            python_source=pick("python-source", base.python_source, choices=PYTHON_SOURCES),
            platforms=self.attempt(lambda: self.platforms(where, table), base.platforms)
            if "platform" in table
            else base.platforms,
        )

    def mirrors(self, data: dict[str, Any]) -> Mirrors:
        """[mirrors]: `"source prefix" = "mirror prefix"` lines (spec.mirrors), each checked."""
        table = data.get("mirrors", {})
        if not isinstance(table, dict):
            raise UsageError(f"{self.path}: [mirrors] must be a table", fix="write it as [mirrors]")
        if len(table) > MAX_MIRRORS:
            raise UsageError(
                f"{self.path}: [mirrors] has {len(table)} entries, and at most {MAX_MIRRORS} are accepted",
                fix="map whole registries or index roots instead of single repositories",
            )
        entries, seen = [], {}
        for source, mirror in table.items():
            self.bounded("[mirrors]", "key", source)
            if isinstance(mirror, str):
                self.bounded("[mirrors]", source, mirror)
            try:
                entry = check_entry(source, mirror)
            except ValueError as exc:
                self.problems.append(self.fail("[mirrors]", f'"{source}"', mirror, str(exc)))
                continue
            if entry.source in seen:
                self.problems.append(
                    self.fail(
                        "[mirrors]",
                        f'"{source}"',
                        mirror,
                        f"names the same source as {seen[entry.source]!r} ({entry.source})",
                        fix="keep one entry per source",
                    )
                )
                continue
            seen[entry.source] = source
            entries.append(entry)
        return make_mirrors(entries)

    def site_matrix(self, table: dict[str, Any]) -> str | None:
        """[site] matrix: a folder, relative to envbuild.toml's, made absolute here so every command
        (and every CI file generated from the spec) finds the same one from any working directory."""
        value = self.text("[site]", table, "matrix", check=validate.path_text)
        if value is None:
            return None
        return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(self.path)), value))

    def skips(self, table: dict[str, Any]) -> tuple[skipping.AuditSkip, ...]:
        """[audit] skip: a list of {library, reason} tables, one per library."""
        where = "[audit]"
        value = table.get("skip", [])
        example = (
            'skip = [{library = "libtorch_cuda.so", reason = "cuobjdump 13.5 cannot read it, issue #N"}]'
        )
        if not isinstance(value, list):
            raise self.fail(where, "skip", value, "expected a list of tables", fix=f"use {example}")
        skips: dict[str, skipping.AuditSkip] = {}
        for index, entry in enumerate(value):
            key = f"skip[{index}]"
            if not isinstance(entry, dict):
                raise self.fail(where, key, entry, "expected a table {library, reason}", fix=f"use {example}")
            self.check_keys(f"{where} {key}", entry, SKIP_KEYS)
            found = {}
            for field, check in (("library", skipping.check_library), ("reason", skipping.check_reason)):
                item = entry.get(field)
                if not isinstance(item, str):
                    raise self.fail(
                        where,
                        f"{key}.{field}",
                        item,
                        "is missing" if item is None else "expected a string",
                        fix=f"use {example}",
                    )
                try:
                    found[field] = check(item)
                except ValueError as exc:
                    raise self.fail(where, f"{key}.{field}", item, str(exc), fix=f"use {example}") from None
            if found["library"] in skips:
                raise self.fail(
                    where,
                    f"{key}.library",
                    found["library"],
                    "is skipped twice",
                    fix="keep one entry per library, with one reason",
                )
            skips[found["library"]] = skipping.AuditSkip(
                library=found["library"], reason=found["reason"], source=skipping.SPEC
            )
        return tuple(skips.values())

    def platforms(self, where: str, table: dict[str, Any]) -> tuple[str, ...]:
        """`platform = "linux/arm64"` or `platform = ["linux/amd64", "linux/arm64"]`, canonical and
        without repeats (`aarch64` is read as linux/arm64)."""
        value = table["platform"]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
            raise self.fail(
                where,
                "platform",
                value,
                "expected a platform name or a non-empty list of them",
                fix=f'use platform = "linux/arm64" or platform = ["linux/amd64", "linux/arm64"] '
                f"(accepted: {platforms.accepted()})",
            )
        names: list[str] = []
        for index, item in enumerate(items):
            self.bounded(where, "platform" if isinstance(value, str) else f"platform[{index}]", item)
            try:
                name = platforms.normalize(item)
            except ValueError as exc:
                key = "platform" if isinstance(value, str) else f"platform[{index}]"
                raise self.fail(
                    where, key, item, str(exc), fix=f"use one of: {platforms.accepted()}"
                ) from None
            if name not in names:
                names.append(name)
        return tuple(names)


def judge_setting(setting: SmokeSetting, value: Any, path: str, where: str) -> Any:
    """`value` by the setting's spec rule, as if `where` in `path` held it under the setting's key: what
    it reads as, or the UsageError a spec holding it would give (`{path}: {where} {key} = ...: ...`)."""
    return setting.read(_Reader(path), where, {setting.key: value})


def load_spec(path: str) -> Spec:
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular

    try:
        raw = read_regular(path, limit=limits.FILE_BYTES.get())
    except NotReadable as exc:  # a FIFO waited for ever, /dev/zero filled memory (issue 33)
        raise UsageError(
            f"spec file {path} is not readable as a spec: {exc}",
            fix="pass -f the regular envbuild.toml file (`envbuild init` writes a starter one)",
        ) from None
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
    return parse_spec(data, path, spec_digest(raw, data), raw.decode("utf-8"))


def parse_spec(data: dict[str, Any], path: str, digest: str, source: str = "") -> Spec:
    """The Spec, or one UsageError naming every problem in the file (`source`: its text, for
    quoting numbers as written)."""
    reader = _Reader(path, source)
    reader.check_keys("the top level", data, TOP_LEVEL)
    stack_table = reader.table(data, "stack")
    if not stack_table:  # nothing below can be judged without it
        if isinstance(data.get("stack", {}), dict):
            reader.problems.append(
                UsageError(
                    f"{path}: the [stack] table is missing or empty",
                    fix='add [stack] with at least driver = "550" and framework = "torch"',
                )
            )
        reader.finish()
    stack = reader.stack("[stack]", stack_table, None)

    packages_table = reader.table(data, "packages")
    where = "[packages]"
    packages = Packages(
        pip=reader.attempt(
            lambda: reader.strings(where, packages_table, "pip", validate.pip_requirement), ()
        ),
        apt=reader.attempt(lambda: reader.strings(where, packages_table, "apt", validate.apt_package), ()),
        conda=reader.attempt(lambda: reader.strings(where, packages_table, "conda", validate.conda_spec), ()),
        conda_channels=reader.attempt(
            lambda: reader.strings(where, packages_table, "conda-channels", validate.conda_channel), ()
        )
        or DEFAULT_CONDA_CHANNELS,
        index_url=reader.attempt(
            lambda: reader.text(where, packages_table, "index-url", check=validate.url), None
        ),
        extra_index_urls=reader.attempt(
            lambda: reader.strings(where, packages_table, "extra-index-urls", validate.url), ()
        ),
        framework_index_url=reader.attempt(
            lambda: reader.text(where, packages_table, "framework-index-url", check=validate.url), None
        ),
    )

    image_table = reader.table(data, "image")
    where = "[image]"
    tags = reader.attempt(lambda: reader.strings(where, image_table, "tags", validate.tag_template), ())
    image = ImageSpec(
        repository=reader.attempt(
            lambda: reader.text(
                where, image_table, "repository", DEFAULT_REPOSITORY, check=validate.repository
            ),
            DEFAULT_REPOSITORY,
        ),
        tags=tags or (DEFAULT_TAG,),
        user=reader.attempt(
            lambda: reader.text(where, image_table, "user", DEFAULT_USER, check=validate.user_name),
            DEFAULT_USER,
        ),
        labels=reader.attempt(lambda: reader.mapping(where, image_table, "labels", validate.label_key), ()),
        env=reader.attempt(lambda: reader.mapping(where, image_table, "env", validate.env_name), ()),
        devel=reader.attempt(lambda: reader.boolean(where, image_table, "devel", False), False),
        installer=reader.attempt(
            lambda: reader.text(where, image_table, "installer", "uv", choices=INSTALLERS), "uv"
        ),
    )

    smoke_table = reader.table(data, "smoke")
    smoke = SmokeSpec(
        **{
            setting.field: reader.attempt(
                lambda setting=setting: setting.read(reader, "[smoke]", smoke_table), setting.default
            )
            for setting in SMOKE_SETTINGS
        },
        imports=reader.attempt(lambda: smoke_imports(reader, smoke_table), ()),
        command=reader.attempt(
            lambda: reader.text(
                "[smoke]",
                smoke_table,
                "command",
                check=validate.smoke_command_line,
                fix="quote what a shell would act on in single quotes, e.g. command = \"bash -c 'pytest -q "
                "tests/gpu && echo ok'\", or put the steps in a script in the image and run that",
            ),
            None,
        ),
    )

    audit_table = reader.table(data, "audit")
    skips = reader.attempt(lambda: reader.skips(audit_table), ())
    build_table = reader.table(data, "build")
    build = BuildSpec(
        engine=reader.attempt(lambda: reader.text("[build]", build_table, "engine", choices=ENGINES), None)
    )

    mirrors = reader.attempt(lambda: reader.mirrors(data), NO_MIRRORS)
    site_table = reader.table(data, "site")
    site = SiteSpec(
        matrix=reader.attempt(lambda: reader.site_matrix(site_table), None),
        base_image=reader.attempt(
            lambda: reader.text("[site]", site_table, "base-image", check=validate.image_ref), None
        ),
    )

    targets_raw = data.get("target", [])
    if not isinstance(targets_raw, list):
        reader.problems.append(
            UsageError(
                f"{path}: target must be an array of tables [[target]]",
                fix="write each target as [[target]] with a name",
            )
        )
        targets_raw = []
    targets = []
    own_os = {}  # target name -> whether its own table sets os
    for index, entry in enumerate(targets_raw):
        where = f"[[target]] #{index + 1}"
        if not isinstance(entry, dict):
            reader.problems.append(
                UsageError(f"{path}: {where} must be a table", fix="write it as [[target]]")
            )
            continue
        reader.check_keys(where, entry, TABLE_KEYS["target"])
        name = reader.attempt(
            lambda entry=entry, where=where: reader.text(
                where, entry, "name", required=True, check=validate.target_name
            ),
            None,
        )
        if name is None:
            continue
        if name in (os.path.basename(path), LOCK_NAME):  # `render -o .` would put a context in its place
            reader.problems.append(
                UsageError(
                    f"{path}: {where} name = {name!r} is the name of the spec or its lock, and a target's "
                    "build context is written to a directory of its name",
                    fix="give the target another name",
                )
            )
        targets.append(Target(name=name, stack=reader.stack(f"[[target]] {name!r}", entry, stack)))
        own_os[name] = "os" in entry
    if not targets:
        targets.append(Target(name="default", stack=stack))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        reader.problems.append(
            UsageError(
                f"{path}: target name {duplicates[0]!r} is used twice",
                fix="give every [[target]] a unique name",
            )
        )
    if not reader.problems:  # coherence of values that are each valid; stand-ins would mislead it
        reader.problems += strategy_problems(path, stack_table, targets, own_os, packages)
    reader.finish()
    return Spec(
        path=os.path.abspath(path),
        digest=digest,
        targets=tuple(targets),
        packages=packages,
        image=image,
        smoke=smoke,
        audit_skip=skips,
        build=build,
        mirrors=mirrors,
        site=site,
    )


def smoke_imports(reader: _Reader, table: dict[str, Any]) -> tuple[str, ...]:
    """[smoke] imports: module names, each once, at most MAX_IMPORTS."""
    where = "[smoke]"
    fix = 'list the modules as you import them, e.g. imports = ["transformers", "datasets"]'
    names = reader.strings(where, table, "imports", validate.smoke_import, fix=fix, most=MAX_IMPORTS)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise reader.fail(
            where, "imports", list(names), f"names {twice[0]!r} twice", fix="list each module once"
        )
    return names


def strategy_problems(
    path: str,
    stack_table: dict[str, Any],
    targets: list[Target],
    own_os: dict[str, bool],
    packages: Packages,
) -> list[UsageError]:
    """Settings no target's strategy uses, which envbuild used to drop without a word.

    Errors, not warnings: each is a line the author wrote expecting an effect, and the image would
    silently lack it. A setting some other target uses (an [stack] os inherited by one conda target
    among wheels targets) is not one of them."""
    problems = []
    conda_targets = [t.name for t in targets if t.stack.strategy == "conda"]
    if packages.conda and not conda_targets:
        strategies = sorted({t.stack.strategy for t in targets})
        problems.append(
            UsageError(
                f'{path}: [packages] conda = {list(packages.conda)!r}, but no target uses strategy = "conda" '
                f"(strategy: {', '.join(strategies)}), so no image would get them",
                fix='move them to [packages] pip (PyPI names), or set strategy = "conda" in [stack] '
                "or in the [[target]] that needs them",
            )
        )
    if packages.conda_channels != DEFAULT_CONDA_CHANNELS and not conda_targets:
        problems.append(
            UsageError(
                f"{path}: [packages] conda-channels = {list(packages.conda_channels)!r}, but no target uses "
                'strategy = "conda", so no solve would read them',
                fix='remove conda-channels from [packages], or set strategy = "conda" in [stack] or in the '
                "[[target]] that needs them",
            )
        )
    micromamba = "mambaorg/micromamba (Debian), whatever os says"
    every_conda = bool(targets) and len(conda_targets) == len(targets)
    if "os" in stack_table and every_conda and not any(own_os.values()):
        problems.append(
            UsageError(
                f'{path}: [stack] os = {stack_table["os"]!r} is not used: strategy = "conda" builds on '
                f"{micromamba}",
                fix='remove os from [stack], or use strategy = "wheels" or "base-image" to build on that OS',
            )
        )
    for target in targets:
        if own_os.get(target.name) and target.stack.strategy == "conda":
            problems.append(
                UsageError(
                    f"{path}: [[target]] {target.name!r} os = {target.stack.os!r} is not used: strategy = "
                    f'"conda" builds on {micromamba}',
                    fix='remove os from this [[target]], or give it strategy = "wheels" or "base-image"',
                )
            )
    return problems
