"""Every table and key of envbuild.toml, declared once: its type, its default, what it accepts, what it
means.

The reader (spec.model) takes its list of accepted keys from here, so a key cannot be read without
being declared, nor declared without the unknown-key check accepting it; the reference page
(docs: reference/envbuild-toml.md) is generated from the same records. A default here is the value the
reader gives when the key is absent, and `choices` and `bounds` are the very constants it validates
with: tests/unit/test_spec_keys.py feeds each through the reader.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record
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

if TYPE_CHECKING:
    from typing import Any

DEFAULT_TAG = "{target}-{framework}{framework_version}-cuda{cuda}-py{python}"
DEFAULT_USER = "envbuild"
DEFAULT_REPOSITORY = "envbuild/train"
DEFAULT_CONDA_CHANNELS = ("conda-forge",)
DEFAULT_OS = "ubuntu22.04"
# what installs Python packages inside the image: uv (fast, never left in the image) or pip, for
# bases where uv's manylinux binary cannot run (musl, glibc older than 2.17, other CPUs)
INSTALLERS = ("uv", "pip")
# where a Python other than the OS's python3 may come from: only what the spec opts into
PYTHON_SOURCES = ("system", "deadsnakes")
# the container engines `envbuild build` can use ([build] engine, --engine; envbuild.engine has each)
ENGINES = ("docker", "podman")

# how each value is written in TOML (the reference's type column)
STRING = "string"
STRINGS = "list of strings"
STRING_OR_STRINGS = "string or list of strings"
BOOLEAN = "boolean"
INTEGER = "integer"
STRING_TABLE = "table of strings"
TABLE_LIST = "list of tables"


class SpecTable(Record):
    """A table of envbuild.toml. `array`: written [[name]], one table per item. `free_keys`: the
    keys are the user's own (what they are, in words); None: the keys are the SpecKeys of this table."""

    __slots__ = ("name", "array", "meaning", "free_keys")
    name: str
    array: bool
    meaning: str
    free_keys: str | None

    @property
    def heading(self) -> str:
        return f"[[{self.name}]]" if self.array else f"[{self.name}]"


class SpecKey(Record):
    """One key. `table`: its table's name ("audit.skip": the tables of [audit] skip). `field`: the
    attribute of the table's value (StackSpec, Packages, ...) it is read into. `default`: what the
    reader gives when the key is absent (None: unset; `required` keys have none). `choices` /
    `bounds`: the values accepted, by the constants the reader checks with; `accepts`: the rule for
    the others, in words. `example`: a valid value other than the default, as TOML would hold it."""

    __slots__ = (
        "table",
        "key",
        "type",
        "default",
        "required",
        "choices",
        "bounds",
        "accepts",
        "meaning",
        "field",
        "example",
    )
    table: str
    key: str
    type: str
    default: Any
    required: bool
    choices: tuple[str, ...] | None
    bounds: tuple[int, int] | None
    accepts: str
    meaning: str
    field: str
    example: Any


def _key(
    table: str,
    key: str,
    type: str,
    meaning: str,
    *,
    default: Any = None,
    required: bool = False,
    choices: tuple[str, ...] | None = None,
    bounds: tuple[int, int] | None = None,
    accepts: str = "",
    field: str | None = None,
    example: Any,
) -> SpecKey:
    return SpecKey(
        table=table,
        key=key,
        type=type,
        default=default,
        required=required,
        choices=choices,
        bounds=bounds,
        accepts=accepts,
        meaning=meaning,
        field=field or key.replace("-", "_"),
        example=example,
    )


TABLES = (
    SpecTable(
        name="stack",
        array=False,
        meaning="What `envbuild resolve` takes, plus how to build it: the driver, the GPUs, the framework "
        "and the constraints every target starts from. Required.",
        free_keys=None,
    ),
    SpecTable(
        name="packages",
        array=False,
        meaning="What the image installs on top of the framework, and the indexes and channels it "
        "installs from.",
        free_keys=None,
    ),
    SpecTable(
        name="image",
        array=False,
        meaning="The image itself: its repository and tags, its user, its labels and environment.",
        free_keys=None,
    ),
    SpecTable(
        name="smoke",
        array=False,
        meaning="The smoke training step every image must pass before it is promoted, and your own "
        "checks after it. The image carries them (device, steps, precision and timeout as labels), so "
        "`envbuild verify` runs it as the spec says.",
        free_keys=None,
    ),
    SpecTable(
        name="audit",
        array=False,
        meaning="Libraries the kernel audit does not judge, each with the reason why (`envbuild audit`).",
        free_keys=None,
    ),
    SpecTable(
        name="build",
        array=False,
        meaning="How the team's images are built. A flag or an `ENVBUILD_*` variable wins over it.",
        free_keys=None,
    ),
    SpecTable(
        name="mirrors",
        array=False,
        meaning="Prefix rewrites from a canonical source to the mirror a site reaches instead, for every "
        "kind of source envbuild fetches from. Not part of the spec digest the lock records.",
        free_keys="each key is a canonical source prefix and its value the mirror prefix that stands in "
        "for it, both of one kind: an http(s) URL prefix (Python indexes, conda channels, apt archives: "
        '`"https://pypi.org/simple" = "https://proxy.internal/pypi/simple"`) or an image registry or '
        'repository prefix (base images: `"docker.io/nvidia/cuda" = "registry.internal/nvidia/cuda"`). '
        "The longest matching prefix wins; a prefix matches at a path boundary only; credentials (`user@`) "
        "are refused",
    ),
    SpecTable(
        name="site",
        array=False,
        meaning="What a site sets once for every command and every generated CI file, in place of a "
        "flag on each. Not part of the spec digest the lock records.",
        free_keys=None,
    ),
    SpecTable(
        name="target",
        array=True,
        meaning="One image per target: each has a name and overrides any `[stack]` key for itself. "
        "Without one, the spec has a single target named `default`.",
        free_keys=None,
    ),
)

STACK = (
    _key(
        "stack",
        "driver",
        STRING,
        "The NVIDIA driver your nodes run; a bare branch means a current driver of that branch.",
        required=True,
        accepts="a driver version or branch: `550`, `R550`, `550.54` or `550.54.15`",
        example="550",
    ),
    _key(
        "stack",
        "gpus",
        STRINGS,
        "Every GPU the image must run on: the framework build must carry kernels for each.",
        default=(),
        accepts="GPU names or aliases (`H100`, `RTX 4090`, `L4`) or compute capabilities (`8.9`, `sm_89`), "
        "as `envbuild matrix gpus` lists them",
        example=["H100", "L4"],
    ),
    _key(
        "stack",
        "python",
        STRING,
        "The Python version the stack must support; unset: the OS's own python3 (conda: the newest "
        "the release supports).",
        accepts='`X.Y`, quoted (`"3.10"`)',
        example="3.11",
    ),
    _key(
        "stack",
        "framework",
        STRING,
        "The framework to train with, with an optional PEP 440 specifier that pins a release.",
        required=True,
        accepts="`torch`, `tensorflow` or `jax`, optionally with a specifier: `torch==2.5.*`",
        example="jax",
    ),
    _key(
        "stack",
        "cuda",
        STRING,
        "A constraint on the CUDA runtime; unset: the newest the driver runs.",
        accepts="a version or a PEP 440 specifier: `12.4`, `>=12.1`",
        example=">=12.1",
    ),
    _key(
        "stack",
        "compat",
        STRING,
        "`minor` also allows newer CUDA minors of the driver's major through minor-version "
        "compatibility (no JIT of newer PTX).",
        default="native",
        choices=COMPAT_MODES,
        example="minor",
    ),
    _key(
        "stack",
        "strategy",
        STRING,
        "Where CUDA comes from: the framework's own wheels, an nvidia/cuda base image, or conda-forge "
        "(micromamba).",
        default="wheels",
        choices=STRATEGIES,
        example="base-image",
    ),
    _key(
        "stack",
        "os",
        STRING,
        'The base OS of the image (not used by `strategy = "conda"`, which builds on micromamba).',
        default=DEFAULT_OS,
        accepts="an OS of the matrix (matrix/os.toml)",
        example="ubuntu24.04",
    ),
    _key(
        "stack",
        "python-source",
        STRING,
        "Where a Python other than the OS's python3 may come from: `deadsnakes` opts in to the "
        "deadsnakes PPA (Ubuntu only).",
        default="system",
        choices=PYTHON_SOURCES,
        example="deadsnakes",
    ),
    _key(
        "stack",
        "platform",
        STRING_OR_STRINGS,
        "The platform(s) to build for; unset: what the GPUs imply (a Grace GPU means linux/arm64), else "
        "linux/amd64. Several give one image per platform under one tag.",
        default=(),
        accepts=" or ".join(f"`{name}`" for name in platforms.PLATFORMS)
        + " (aliases such as `x86_64` and `aarch64` read as those), or a list of them",
        field="platforms",
        example="linux/arm64",
    ),
)

KEYS: tuple[SpecKey, ...] = (
    *STACK,
    _key(
        "packages",
        "pip",
        STRINGS,
        "Python packages installed on top of the framework, locked with hashes by `envbuild lock`.",
        default=(),
        accepts="PEP 508 requirements: `numpy>=1.26`, `transformers==4.44.2`; one `;` may begin a marker",
        example=["numpy>=1.26"],
    ),
    _key(
        "packages",
        "apt",
        STRINGS,
        "OS packages installed with apt.",
        default=(),
        accepts="Debian package names, optionally `=version`: `libgl1`",
        example=["libgl1"],
    ),
    _key(
        "packages",
        "conda",
        STRINGS,
        "conda packages (strategy `conda` only), solved with the framework held.",
        default=(),
        accepts="conda match specs: `numpy`, `numpy=1.26`, `numpy>=1.26,<2`",
        example=["optax"],
    ),
    _key(
        "packages",
        "conda-channels",
        STRINGS,
        "The channels the conda solve reads, highest priority first (strategy `conda` only); an empty "
        "list means the default.",
        default=DEFAULT_CONDA_CHANNELS,
        accepts="channel names (`conda-forge`) or http(s) URLs of a channel or its mirror",
        example=["conda-forge", "nvidia"],
    ),
    _key(
        "packages",
        "index-url",
        STRING,
        "The Python package index for the spec's own packages; unset: PyPI.",
        accepts="an http(s) URL without credentials",
        example="https://pypi.org/simple",
    ),
    _key(
        "packages",
        "extra-index-urls",
        STRINGS,
        "More Python package indexes for the spec's own packages.",
        default=(),
        accepts="http(s) URLs without credentials",
        example=["https://download.example.com/simple"],
    ),
    _key(
        "packages",
        "framework-index-url",
        STRING,
        "A mirror of the framework variant's own index (download.pytorch.org/whl/cuXYZ); unset: the "
        "matrix's index.",
        accepts="an http(s) URL without credentials",
        example="https://mirror.example/whl/cu124",
    ),
    _key(
        "image",
        "repository",
        STRING,
        "The image repository the tags are made in.",
        default=DEFAULT_REPOSITORY,
        accepts="an image repository without tag or digest: `ghcr.io/acme/train`",
        example="ghcr.io/acme/train",
    ),
    _key(
        "image",
        "tags",
        STRINGS,
        "The tags a verified image gets; an empty list means the default.",
        default=(DEFAULT_TAG,),
        accepts="tags with the placeholders `{target}`, `{framework}`, `{framework_version}`, `{cuda}`, "
        "`{python}`",
        example=["{target}-latest"],
    ),
    _key(
        "image",
        "user",
        STRING,
        "The non-root user images run as.",
        default=DEFAULT_USER,
        accepts="a Linux user name (lowercase, digits, `_`, `-`, at most 32); `root` and `0` are refused",
        example="trainer",
    ),
    _key(
        "image",
        "labels",
        STRING_TABLE,
        "Labels added to the image.",
        default=(),
        accepts="label keys in reverse-DNS style (not `io.envbuild.*`), printable values",
        example={"org.opencontainers.image.source": "https://github.com/acme/train"},
    ),
    _key(
        "image",
        "env",
        STRING_TABLE,
        "Environment variables set in the image (torch images get "
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` unless this sets it).",
        default=(),
        accepts="variable names of letters, digits and `_`; printable values",
        example={"HF_HOME": "/cache/hf"},
    ),
    _key(
        "image",
        "devel",
        BOOLEAN,
        "strategy `base-image`: compile user packages in a CUDA devel stage; compilers stay out of the "
        "final image.",
        default=False,
        example=True,
    ),
    _key(
        "image",
        "installer",
        STRING,
        "What installs Python packages inside the image: `pip` for bases uv cannot run on (musl, glibc "
        "older than 2.17).",
        default="uv",
        choices=INSTALLERS,
        example="pip",
    ),
    _key(
        "smoke",
        "device",
        STRING,
        "Where the smoke step trains: `cpu` for CI without GPUs; such images are never promoted as "
        "GPU-verified.",
        default="gpu",
        choices=DEVICES,
        example="cpu",
    ),
    _key(
        "smoke",
        "steps",
        INTEGER,
        "Training steps of the smoke step.",
        default=DEFAULT_STEPS,
        bounds=STEPS_RANGE,
        example=5,
    ),
    _key(
        "smoke",
        "precision",
        STRING,
        "The precision the smoke step trains in.",
        default=DEFAULT_PRECISION,
        choices=PRECISIONS,
        example="bf16",
    ),
    _key(
        "smoke",
        "timeout",
        INTEGER,
        "Seconds the smoke step may take.",
        default=DEFAULT_TIMEOUT_S,
        bounds=TIMEOUT_RANGE_S,
        example=1200,
    ),
    _key(
        "smoke",
        "imports",
        STRINGS,
        "Modules to import in the image after the training step: your own checks.",
        default=(),
        accepts=f"module names as you import them (`sklearn`, `yaml`), each once, at most {MAX_IMPORTS}",
        example=["json"],
    ),
    _key(
        "smoke",
        "command",
        STRING,
        "One command to run in the image after the training step, without a shell.",
        accepts="one command and its arguments: `python -m myproject.selftest`",
        example="python -m myproject.selftest",
    ),
    _key(
        "audit",
        "skip",
        TABLE_LIST,
        "Libraries the audit does not judge, for every target; `--skip-audit` adds to them.",
        default=(),
        accepts='tables `{library = "...", reason = "..."}`, one per library',
        field="audit_skip",
        example=[{"library": "libtorch_cuda.so", "reason": "cuobjdump cannot read it, issue #1"}],
    ),
    _key(
        "audit.skip",
        "library",
        STRING,
        "The library's file name.",
        required=True,
        accepts="a file name: `libtorch_cuda.so`",
        example="libtorch_cuda.so",
    ),
    _key(
        "audit.skip",
        "reason",
        STRING,
        "Why it is not judged: recorded in the audit report, record.json and the SBOM.",
        required=True,
        accepts="one line of text",
        example="cuobjdump cannot read it, issue #1",
    ),
    _key(
        "build",
        "engine",
        STRING,
        "The container engine `envbuild build` uses; `--engine` and `ENVBUILD_ENGINE` win over it; "
        "unset: docker.",
        choices=ENGINES,
        example="podman",
    ),
    _key(
        "site",
        "matrix",
        STRING,
        "A team's extended copy of matrix/, relative to envbuild.toml's folder; `--matrix` and "
        "`ENVBUILD_MATRIX` win over it.",
        accepts="a folder path",
        example="team-matrix",
    ),
    _key(
        "site",
        "base-image",
        STRING,
        "The base image every target builds on, as `--base-image` would set it (a flag wins).",
        accepts="an image reference: `registry.internal/nvidia/cuda:12.4.1-runtime-ubuntu22.04`",
        example="registry.internal/nvidia/cuda:12.4.1-runtime-ubuntu22.04",
    ),
    _key(
        "target",
        "name",
        STRING,
        "The target's name: its build context is `build/<name>/`. Every other key of a `[[target]]` "
        "is a `[stack]` key, overriding `[stack]`'s value for this target.",
        required=True,
        accepts="lowercase letters, digits, `_`, `.`, `-`; unique; not the spec's or the lock's file name",
        example="h100",
    ),
)


def keys_of(table: str) -> tuple[SpecKey, ...]:
    return tuple(key for key in KEYS if key.table == table)


def key_names(table: str) -> tuple[str, ...]:
    return tuple(key.key for key in keys_of(table))


# the tables a spec may have, in the order an error lists them
TOP_LEVEL = tuple(table.name for table in TABLES)
# the keys each table accepts: the reader's unknown-key check. A [[target]] takes [stack]'s too.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    table.name: key_names(table.name) + (key_names("stack") if table.name == "target" else ())
    for table in TABLES
    if table.free_keys is None
}
STACK_KEYS = TABLE_KEYS["stack"]
SKIP_KEYS = key_names("audit.skip")
