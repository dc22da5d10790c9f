"""Turn `envbuild resolve` flag values into a validated Query.

Every bad value becomes a UsageError (exit 2) that names the flag, the accepted forms and the closest
known values, before any resolving happens.
"""

from __future__ import annotations

import re

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import UsageError
from envbuild.matrix.gpunames import similar_names
from envbuild.matrix.model import (
    COMPAT_MODES,
    STRATEGIES,
    Framework,
    Gpu,
    Matrix,
    find_gpu,
    gpu_index,
)
from envbuild.matrix.platforms import accepted as accepted_platforms
from envbuild.matrix.platforms import normalize as normalize_platform
from envbuild.matrix.support import capability_gpu, capability_names, gpus_with, known_capabilities
from envbuild.matrix.versions import Driver, format_cc, parse_compute_capability, parse_driver, parse_minor

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
        "platform",
        "notes",
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
    platform: str  # canonical (linux/amd64, linux/arm64): --platform, else what the GPUs imply
    notes: tuple[str, ...]  # how an input was read, when that is not obvious ("sm_90a is judged as 9.0")


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
    """A GPU by capability (sm_89, 8.9, compute_89, sm_90a) or by name (`find_gpu`).

    A capability stands for the matrix's GPUs that have it (`capability_gpu`: their floors and last
    branch); one no GPU in the matrix has is a UsageError, as is an unknown name, each naming close
    matches: a typo must not pass as a GPU "covered by PTX JIT".
    """
    cc = parse_compute_capability(text)
    if cc is not None:
        stand_in = capability_gpu(matrix, cc)
        if stand_in is None:
            raise _unknown_capability(text, cc, matrix)
        return stand_in
    index = index if index is not None else gpu_index(matrix)
    found = find_gpu(matrix, text, index)
    if found is not None:
        return found
    raise unknown_gpu(text, matrix, flag="--gpu")


def unknown_gpu(text: str, matrix: Matrix, *, flag: str) -> UsageError:
    """Exit 2 for a name no row has: rows of the same series with nearby model numbers
    (gpunames.similar_names: never an RTX 5080 for a GTX 1080 Ti), and the two ways on: the
    capability nvidia-smi reports, or a row of its own."""
    close = similar_names(text, sorted({gpu.name for gpu in matrix.gpus}))
    hint = f"did you mean {', '.join(close)}? " if close else ""
    hint = hint or "check the spelling, "
    return UsageError(
        f"{flag} {text!r} is not a GPU envbuild knows",
        fix=f"{hint}or give its compute capability instead of the name, as `nvidia-smi "
        f"--query-gpu=compute_cap --format=csv` prints it (e.g. 8.6 or sm_86); `envbuild matrix gpus` "
        f"lists the names. To "
        f"add the GPU: a [[gpu]] row (name, compute_capability, architecture, first_cuda, segment, "
        f"source) in a copy of matrix/gpus.toml, `envbuild matrix check --matrix DIR`, then "
        f"--matrix DIR",
    )


def gpu_note(text: str) -> str | None:
    """What a capability spelling was taken to mean, when it says more than X.Y."""
    cc = parse_compute_capability(text)
    if cc is None:
        return None
    spelled = text.strip()
    judged = f"{spelled} is judged as compute capability {format_cc(cc)}"
    if spelled.lower().endswith("a"):
        return f"{judged} (arch-specific features are not part of the matrix)"
    if spelled.lower().endswith("f"):
        return f"{judged} (family-specific features are not part of the matrix)"
    if spelled.lower().startswith("compute"):
        return f"{judged} (a PTX virtual architecture stands for the GPUs that have that capability)"
    return None


def _unknown_capability(text: str, cc: tuple[int, int], matrix: Matrix) -> UsageError:
    """Exit 2 naming the nearest capabilities the matrix has (same major first) and every one."""
    known = known_capabilities(matrix)

    def distance(k: tuple[int, int]) -> tuple[bool, int, int, int]:  # same major, then nearest, then newer
        return k[0] != cc[0], abs((k[0] * 10 + k[1]) - (cc[0] * 10 + cc[1])), -k[0], -k[1]

    nearest = sorted(known, key=distance)[:2]
    if nearest and nearest[0][0] == cc[0]:
        nearest = [k for k in nearest if k[0] == cc[0]]
    close = [f"{format_cc(k)} ({capability_names(gpus_with(matrix, k))})" for k in nearest]
    return UsageError(
        f"--gpu {text!r} is compute capability {format_cc(cc)}, which no GPU in the matrix has",
        fix=f"did you mean {' or '.join(close)}? known capabilities: "
        f"{', '.join(format_cc(k) for k in known)}; or give the GPU's name (e.g. H100, 'RTX 4090'). "
        "A GPU the matrix lacks needs its row in gpus.toml: copy matrix/, add the row and pass "
        "--matrix DIR",
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
    platform: str | None = None,
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
    from envbuild.resolve.platform_choice import choose_platform, refuse_integrated

    refuse_integrated(parsed_gpus, "--gpu")
    requested_platform = None
    if platform is not None:
        _refuse_blank("--platform", (platform,), f"a platform: {accepted_platforms()}")
        try:
            requested_platform = normalize_platform(platform)
        except ValueError:
            raise UsageError(
                f"--platform {platform!r} is not a platform envbuild builds for",
                fix=f"use one of: {accepted_platforms()} (aarch64/arm64 and x86_64/amd64 are read too)",
            ) from None
    chosen_platform = choose_platform(parsed_gpus, requested_platform)
    notes = tuple(dict.fromkeys(n for n in (gpu_note(g) for g in gpus or ()) if n))
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
        platform=chosen_platform,
        notes=notes,
    )
