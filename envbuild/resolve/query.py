"""Turn `envbuild resolve` flag values into a validated Query.

Every bad value becomes a UsageError (exit 2) that names the flag, the accepted forms and the closest
known values, before any resolving happens.
"""

from __future__ import annotations

import re

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.matrix.model import (
    COMPAT_MODES,
    STRATEGIES,
    Framework,
    Gpu,
    Matrix,
    Provenance,
    find_gpu,
    gpu_index,
    gpu_tokens,
)
from envbuild.matrix.versions import Driver, parse_compute_capability, parse_driver, parse_minor, sm_name

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

_FRAMEWORK_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.-]*)\s*(.*?)\s*$")


class FrameworkFilter(Record):
    """The releases of one framework the user asked for: any release matching any of the specifiers.

    Repeated `--framework` flags for one framework are alternatives (`'torch==2.5.*'` and
    `'torch==2.6.*'` asks for either), so they are kept side by side, never intersected; one flag's
    own comma list (`'torch>=2.4,<2.6'`) is PEP 440's AND, as pip reads it."""

    __slots__ = ("framework", "specifiers", "text")
    framework: Framework
    specifiers: tuple[SpecifierSet, ...]  # empty: every release
    text: str  # as the user wrote it, for messages

    def allows(self, version: str) -> bool:
        return not self.specifiers or any(s.contains(version, prereleases=True) for s in self.specifiers)

    def describe(self) -> str:
        """`'torch==2.5.*' or 'torch==2.6.*'`: the filter as --framework values, for a rejection."""
        name = self.framework.name
        return " or ".join(f"'{name}{spec}'" for spec in self.specifiers) or f"'{name}'"


class Query(Record):
    __slots__ = (
        "driver",
        "gpus",
        "frameworks",
        "python",
        "cuda",
        "cuda_text",
        "compat",
        "limit",
        "strategy",
        "os",
    )
    driver: Driver
    gpus: tuple[Gpu, ...]
    frameworks: tuple[FrameworkFilter, ...]  # empty: every framework, best stack of each
    python: tuple[int, int] | None
    cuda: SpecifierSet | None
    cuda_text: str | None
    compat: str
    limit: int
    strategy: str | None  # wheels | base-image | conda; None: any
    os: str | None  # base OS; base-image looks for nvidia/cuda tags on it


def _specifier_set(text: str, *, flag: str, example: str) -> SpecifierSet:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(
            f"{flag} {text!r} is not a PEP 440 version specifier", fix=f"write it like {example}"
        ) from None


def parse_framework(text: str, matrix: Matrix) -> FrameworkFilter:
    match = _FRAMEWORK_RE.match(text)
    names = ", ".join(fw.name for fw in matrix.frameworks)
    if not match:
        raise UsageError(
            f"--framework {text!r} is not NAME[SPECIFIER]",
            fix=f"write e.g. torch, 'torch==2.5.*' or 'jax>=0.6'; names: {names}",
        )
    name, rest = match.groups()
    framework = matrix.framework(name)
    if framework is None:
        import difflib

        known = [fw.name for fw in matrix.frameworks] + [a for fw in matrix.frameworks for a in fw.aliases]
        close = difflib.get_close_matches(name.lower(), known, n=2)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(
            f"--framework {text!r}: unknown framework {name!r}", fix=f"{hint}known frameworks: {names}"
        )
    if not rest:
        return FrameworkFilter(framework=framework, specifiers=(), text=text)
    if rest[0].isdigit():
        raise UsageError(
            f"--framework {text!r}: a bare version is ambiguous",
            fix=f"write '{name}=={rest}' for exactly that release or "
            f"'{name}=={rest}.*' for its patch releases",
        )
    return FrameworkFilter(
        framework=framework,
        specifiers=(_specifier_set(rest, flag="--framework", example="'torch==2.5.*' or 'torch>=2.4,<2.6'"),),
        text=text,
    )


def parse_gpu(text: str, matrix: Matrix, index: dict[str, Gpu] | None = None) -> Gpu:
    """A GPU by capability (sm_89, 8.9) or by name (`find_gpu`); an unknown one is a UsageError that
    names close matches."""
    cc = parse_compute_capability(text)
    if cc is not None:
        return Gpu(
            name=sm_name(cc),
            aliases=(),
            cc=cc,
            architecture="",
            data_center=False,
            max_driver_branch=None,
            prov=Provenance(
                where="--gpu", source="https://developer.nvidia.com/cuda-gpus", confidence=None, note=None
            ),
        )
    index = index if index is not None else gpu_index(matrix)
    found = find_gpu(matrix, text, index)
    if found is not None:
        return found
    import difflib

    tokens = gpu_tokens(text)
    names = sorted({gpu.name for gpu in matrix.gpus})
    close = difflib.get_close_matches(text, names, n=3, cutoff=0.5) or [
        index[k].name for k in difflib.get_close_matches("".join(tokens), list(index), n=3, cutoff=0.6)
    ]
    hint = f"did you mean {', '.join(dict.fromkeys(close))}? " if close else ""
    raise UsageError(
        f"--gpu {text!r} is not a GPU envbuild knows",
        fix=f"{hint}give a GPU name (e.g. H100, 'RTX 4090', L4) or its compute "
        f"capability (8.9 or sm_89); `envbuild matrix gpus` lists the names",
    )


def _merge_frameworks(filters: list[FrameworkFilter]) -> tuple[FrameworkFilter, ...]:
    """One filter per framework; repeated flags are OR'ed: `--framework 'torch==2.5.*' --framework
    'torch==2.6.*'` allows either series, and a bare `--framework torch` among them allows every
    release (an AND of two series would match nothing, which no one means)."""
    merged: dict[str, FrameworkFilter] = {}
    for item in filters:
        name = item.framework.name
        if name not in merged:
            merged[name] = item
            continue
        previous = merged[name]
        any_release = not previous.specifiers or not item.specifiers
        merged[name] = FrameworkFilter(
            framework=item.framework,
            specifiers=() if any_release else previous.specifiers + item.specifiers,
            text=f"{previous.text}, {item.text}",
        )
    return tuple(merged.values())


def _refuse_blank(flag: str, values: list[str] | tuple[str, ...], accepted: str) -> None:
    """An empty or blank value (`--cuda ''`, often an unset shell variable) is a mistake, not "no
    filter": refuse it rather than silently resolving without the constraint the user meant."""
    for value in values:
        if not value.strip():
            raise UsageError(
                f"{flag} {value!r} is empty",
                fix=f"give {accepted}, or leave {flag} out for no constraint",
            )


def build_query(
    matrix: Matrix,
    *,
    driver: str,
    gpus: list[str] | None = None,
    frameworks: list[str] | None = None,
    python: str | None = None,
    cuda: str | None = None,
    compat: str = "native",
    limit: int | None = None,
    strategy: str | None = None,
    os: str | None = None,
) -> Query:
    parsed_driver = parse_driver(driver)
    if parsed_driver.bare and parsed_driver.branch not in matrix.branches:
        known = sorted(matrix.branches)
        raise UsageError(
            f"--driver {driver!r}: R{parsed_driver.branch} is not a driver branch envbuild knows "
            f"(known: R{known[0]}..R{known[-1]})",
            fix="give the full version nvidia-smi prints (e.g. 550.54.15), or a known branch",
        )
    _refuse_blank(
        "--gpu", gpus or (), "a GPU name (e.g. H100, 'RTX 4090', L4) or its compute capability (8.9)"
    )
    names = ", ".join(fw.name for fw in matrix.frameworks)
    _refuse_blank("--framework", frameworks or (), f"a framework ({names}), optionally as 'torch==2.5.*'")
    for flag, value, accepted in (
        ("--python", python, "a Python X.Y version, e.g. 3.11"),
        ("--cuda", cuda, "a CUDA version or PEP 440 specifier: 12.4, 12, '>=12.1' or '>=12,<13'"),
        ("--os", os, f"one of {', '.join(matrix.oses)}"),
    ):
        _refuse_blank(flag, (value,) if value is not None else (), accepted)
    index = gpu_index(matrix)
    parsed_gpus = tuple(parse_gpu(g, matrix, index) for g in gpus or ())
    parsed_frameworks = _merge_frameworks([parse_framework(f, matrix) for f in frameworks or ()])
    parsed_python = None
    if python is not None:
        try:
            parsed_python = parse_minor(python.strip())
        except ValueError:
            raise UsageError(
                f"--python {python!r} is not a Python X.Y version", fix="write e.g. --python 3.11"
            ) from None
    cuda_spec = None
    if cuda is not None:
        text = cuda.strip()
        if re.fullmatch(r"\d+\.\d+", text):
            text = f"=={text}"
        elif re.fullmatch(r"\d+", text):
            text = f"=={text}.*"
        cuda_spec = _specifier_set(text, flag="--cuda", example="12.4, '>=12.1' or '>=12,<13'")
    if compat not in COMPAT_MODES:
        raise UsageError(
            f"--compat {compat!r} is not a compatibility mode",
            fix="use --compat native (default) or --compat minor",
        )
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit} must be 1 or more", fix="e.g. --limit 5")
    if strategy is not None and strategy not in STRATEGIES:
        raise UsageError(
            f"--strategy {strategy!r} is not a CUDA strategy", fix=f"use one of: {', '.join(STRATEGIES)}"
        )
    if os is not None and os not in matrix.oses:
        import difflib

        close = difflib.get_close_matches(os, list(matrix.oses), n=2)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(
            f"--os {os!r} is not an OS envbuild renders images for",
            fix=f"{hint}known: {', '.join(matrix.oses)}",
        )
    default_limit = 5 if parsed_frameworks else 1
    return Query(
        driver=parsed_driver,
        gpus=parsed_gpus,
        frameworks=parsed_frameworks,
        python=parsed_python,
        cuda=cuda_spec,
        cuda_text=cuda.strip() if cuda else None,
        compat=compat,
        limit=limit or default_limit,
        strategy=strategy,
        os=os,
    )
