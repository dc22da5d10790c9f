"""Render a build plan into a Docker build context: Dockerfile, requirement files or environment.yml,
the smoke program with its shared module (and the spec's smoke checks), .dockerignore and stack.json.

Jinja2 with StrictUndefined: a template that names a value the plan does not have fails loudly
instead of writing an empty string into a Dockerfile. Output bytes depend only on the plan.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from envbuild import __version__
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.lockfile.model import lock_path
from envbuild.plan.builds import builds, by_target
from envbuild.plan.explicit import FILES as CONDA_FILES
from envbuild.plan.lockmatch import lock_for_render, require_match
from envbuild.plan.plan import VENV, Plan, build_plan
from envbuild.plan.strategy import strategy_for
from envbuild.plan.strategy.conda import MICROMAMBA_UID
from envbuild.preflight import FACTS_NAME, MODULE_NAME, PTH_NAME, guard_files
from envbuild.resolve.precision import precision_warnings, warning_text
from envbuild.resolve.query import parse_gpu
from envbuild.smoke import CHECKS_FILE, program_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from envbuild.lockfile.model import LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.plan.builds import TargetBuild
    from envbuild.spec.model import Spec

DOCKERFILE_TEMPLATES = {
    "wheels": "dockerfile/wheels.Dockerfile.j2",
    "base-image": "dockerfile/base-image.Dockerfile.j2",
    "conda": "dockerfile/conda.Dockerfile.j2",
}
PYTHON_ENV = (
    ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ("PIP_NO_CACHE_DIR", "1"),
    ("PYTHONUNBUFFERED", "1"),
    ("VIRTUAL_ENV", VENV),
    ("PATH", f"{VENV}/bin:$PATH"),
)
CONDA_ENV = (("PIP_DISABLE_PIP_VERSION_CHECK", "1"), ("PIP_NO_CACHE_DIR", "1"), ("PYTHONUNBUFFERED", "1"))


def double_quoted(value: object) -> str:
    """A Dockerfile (and YAML) double-quoted string: JSON's escaping, with the text kept as UTF-8,
    since Docker stores a \\u00e9 escape literally."""
    return json.dumps(str(value), ensure_ascii=False)


def literal(value: object) -> str:
    """double_quoted, with `$` escaped: Docker expands $NAME in ENV and LABEL values, so a user's
    `pa$word` would otherwise become `pa`."""
    return double_quoted(value).replace("$", "\\$")


def shell_word(value: object) -> str:
    """One shell word, whatever the value holds: values are validated before they get here, and this
    is the second wall, so a value that slips past a check (a matrix row, a new field) still cannot
    chain a command. shlex.quote leaves plain words (URLs, names, paths) as they are."""
    import shlex

    return shlex.quote(str(value))


def single_quoted(value: object) -> str:
    """Always single-quoted, for words written quoted even when plain (conda match specs)."""
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


def dockerfile_environment():
    """Dockerfiles quote every value with `dq`, or `literal` for text that must not expand; RUN lines
    quote every interpolated word with `sh` (or `sq`)."""
    return environment({"dq": double_quoted, "literal": literal, "sh": shell_word, "sq": single_quoted})


def _squeeze(text: str) -> str:
    """At most one blank line in a row, and exactly one newline at the end."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip("\n") + "\n"


def render_files(plan: Plan) -> dict[str, bytes]:
    env = dockerfile_environment()
    context = {
        "plan": plan,
        "version": __version__,
        "venv": VENV,
        "python_env": PYTHON_ENV,
        "conda_env": CONDA_ENV,
        "micromamba_uid": MICROMAMBA_UID,
    }
    files = {
        "Dockerfile": _squeeze(env.get_template(DOCKERFILE_TEMPLATES[plan.strategy]).render(context)),
        ".dockerignore": _squeeze(env.get_template("context/dockerignore.j2").render(context)),
        "requirements-framework.txt": plan.framework_lines,
        "constraints.txt": "".join(f"{r}\n" for r in plan.constraints),
        "requirements.txt": plan.user_lines,
        "stack.json": json.dumps(plan.stack_document, indent=2, sort_keys=True) + "\n",
    }
    if plan.cuda_lines:
        files["requirements-cuda.txt"] = plan.cuda_lines
    strategy = strategy_for(plan.strategy)
    if not strategy.pip_framework:
        del files["requirements-framework.txt"]
    if plan.conda_framework_lines:  # the lock's conda layer, installed as it is (plan.explicit)
        files[CONDA_FILES["framework"]] = plan.conda_framework_lines
        if plan.conda_user_lines:
            files[CONDA_FILES["user"]] = plan.conda_user_lines
    elif strategy.conda_environment:  # no conda layer locked: micromamba solves this at build time
        files["environment.yml"] = _squeeze(env.get_template("conda/environment.yml.j2").render(context))
    encoded = {name: text.encode() for name, text in files.items()}
    encoded.update(program_files(plan.stack.framework.name))  # smoke.py and smoke_common.py
    if plan.smoke_checks:  # the spec's [smoke] imports and command, beside the program that runs them
        encoded[CHECKS_FILE] = plan.smoke_checks
    encoded.update(guard_files(plan.preflight))  # the preflight guard, its .pth and its facts
    return encoded


GUARD_FILES = (MODULE_NAME, PTH_NAME, FACTS_NAME)

# Marks a directory as a build context envbuild wrote, and so may replace (never sent to the Engine:
# .dockerignore lets in only what the Dockerfile uses).
MARKER = ".envbuild-context"
MARKER_TEXT = "Written by `envbuild render`; envbuild replaces this directory when it renders again.\n"
# What a context held before the marker existed, and what build adds: a directory with only these
# is one envbuild wrote, so nothing of the user's is lost when it is replaced.
CONTEXT_NAMES = frozenset(
    {
        "Dockerfile",
        ".dockerignore",
        "requirements-framework.txt",
        "requirements-cuda.txt",
        "requirements.txt",
        "constraints.txt",
        "environment.yml",
        *CONDA_FILES.values(),
        "stack.json",
        "smoke.py",
        "smoke_common.py",
        CHECKS_FILE,
        *GUARD_FILES,
        "wheels",
        "uv",
        "record.json",
        "build.log",
        "smoke-report.json",
    }
)


def is_envbuild_context(path: str) -> bool:
    if os.path.isfile(os.path.join(path, MARKER)):
        return True
    try:
        names = set(os.listdir(path))
    except OSError:
        return False
    return "stack.json" in names and "Dockerfile" in names and names <= CONTEXT_NAMES


def check_destination(out_dir: str, target: str) -> str:
    """out_dir/<target>, when rendering may write there: absent, or a context envbuild wrote.

    A target named like a directory of the user's (`docs`) or like the spec file must not delete it."""
    destination = os.path.join(out_dir, target)
    if os.path.lexists(destination) and (
        os.path.islink(destination) or not os.path.isdir(destination) or not is_envbuild_context(destination)
    ):
        raise UsageError(
            f"{destination} exists and is not a build context envbuild wrote; rendering target "
            f"{target!r} into {out_dir} would replace it",
            fix=f"render into another directory (-o build), or move {destination} away",
        )
    return destination


def _fill(staging: str, files: dict[str, bytes], wheelhouse: str | None, plan: Plan | None) -> None:
    """One context's files, its share of the wheelhouse and its uv binary, for its plan's platform."""
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would make the context unreadable to a non-root builder
    for name, data in sorted({**files, MARKER: MARKER_TEXT.encode()}.items()):
        with open(os.path.join(staging, name), "wb") as handle:
            handle.write(data)
    if wheelhouse is not None:
        from envbuild.render.wheelhouse import split_wheelhouse

        assert plan is not None
        split_wheelhouse(
            wheelhouse,
            os.path.join(staging, "wheels"),
            plan.framework_requirements,
            plan.python,
            cuda=bool(plan.cuda_lines),
            image_platform=plan.platform,
        )
    if plan is not None and plan.installer == "uv":
        from envbuild.render.uvbin import place_uv

        place_uv(
            os.path.join(staging, "uv"), wheelhouse, plan.platform, index=plan.index_url, mirrors=plan.mirrors
        )


def write_context(
    files: dict[str, bytes],
    out_dir: str,
    target: str,
    *,
    wheelhouse: str | None = None,
    plan: Plan | None = None,
    platforms: dict[str, tuple[dict[str, bytes], Plan]] | None = None,
) -> str:
    """Write DIR/<target>/ all at once: a failure leaves the previous context untouched, and only
    a context envbuild wrote is ever replaced (check_destination).

    `platforms` (arch -> (files, plan)), for a target with several platforms: each is written to
    DIR/<target>/<arch>/ (plan.builds.TargetBuild.context), and `files` and `plan` are not used."""
    destination = check_destination(out_dir, target)
    try:
        os.makedirs(out_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{target}.", dir=out_dir)
    except OSError as exc:
        raise _unwritable(out_dir, exc) from None
    try:
        if platforms:
            _fill(staging, {}, None, None)  # the marker: render replaces the whole directory
            for arch, (part_files, part_plan) in sorted(platforms.items()):
                os.mkdir(os.path.join(staging, arch))
                _fill(os.path.join(staging, arch), part_files, wheelhouse, part_plan)
        else:
            _fill(staging, files, wheelhouse, plan)
        old = None
        if os.path.exists(destination):
            old = tempfile.mkdtemp(prefix=f".{target}.old.", dir=out_dir)
            os.rename(destination, os.path.join(old, target))
        os.rename(staging, destination)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _unwritable(out_dir, exc) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


def _unwritable(out_dir: str, exc: OSError) -> UsageError:
    return UsageError(
        f"-o {out_dir}: cannot write the build context ({exc.strerror or exc})",
        fix="give -o a directory you can write to, on a filesystem with free space",
    )


def check_output_dir(out_dir: str) -> None:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"-o {out_dir} exists and is not a directory", fix="pass a directory path")


def from_bundle(plan: Plan) -> Plan:
    """The plan a bundle build's Dockerfile is rendered from: FROM names the base's bundle-local tag
    (render.bundleoci.bundle_from); the plan kept for labels and records names the canonical base."""
    from envbuild.render.bundleoci import bundle_from, local_name

    return bundle_from(plan, local_name(plan.base_image))


class Rendered(Record):
    """One target's build context for one platform: its plan, its files, where they were written
    (None: not), and its name (<target>, or <target>/<arch> for a target with several platforms)."""

    __slots__ = ("plan", "files", "where", "name")
    plan: Plan
    files: dict[str, bytes]
    where: str | None
    name: str


def render_spec(
    matrix: Matrix,
    spec: Spec,
    spec_file: str,
    *,
    out_dir: str,
    write: bool = True,
    target: str | None = None,
    base_image: str | None = None,
    wheelhouse: str | None = None,
    buildkit: bool = True,
    lock_key: bytes | None = None,
    allow_edited_lock: bool = False,
    bundle: str | None = None,
    load_base: Callable[[str, str], str] | None = None,
    warn: Callable[[str], None],
) -> list[Rendered]:
    """`envbuild render`: every target (or `target`) planned against the lock next to the spec, when
    there is one, and rendered for each of its platforms; with `write`, each context is written to
    out_dir/<target>/, or out_dir/<target>/<arch>/ per platform (plan.builds.TargetBuild.context).

    Every target resolves and renders before anything is written, so a target that fails leaves
    every context as it was.

    `bundle` (render --bundle): the bundle must cover the lock (render.bundle.require_covers) before
    anything is written; its wheels/ is the wheelhouse, and each Dockerfile's FROM names the base's
    bundle-local tag, which `load_base(bundle, base_image)` (envbuild.image.bundlebase.load_base: the
    CLI passes it when it writes) loads into the engine."""
    check_output_dir(out_dir)
    lock = lock_for_render(spec, matrix.digest, key=lock_key, allow_edited=allow_edited_lock, warn=warn)
    if bundle is not None:
        from envbuild.render.bundle import require_covers

        names = [t.name for t in spec.target(target)] if target is not None else None
        wheelhouse = require_covers(bundle, lock, names, installer=spec.image.installer).wheelhouse
    targets: list[tuple[str, list[tuple[TargetBuild, Plan, dict[str, bytes]]]]] = []
    entries: list[LockedTarget] = []  # the lock's entries rendered, for the wheelhouse check
    for name, group in by_target(builds(matrix, spec, lock, only=target)).items():
        parts = []
        for build in group:
            plan = build_plan(
                matrix,
                spec,
                build.target,
                base_image=base_image,
                wheelhouse=wheelhouse is not None,
                lock=build.locked,
                buildkit=buildkit,
                platform=build.platform,
            )
            if build.locked is not None:
                require_match(build.locked, plan, lock_path(spec.path))
                entries.append(build.locked)
            parts.append((build, plan, render_files(from_bundle(plan) if bundle is not None else plan)))
        targets.append((name, parts))
        # what `resolve -f` warns of: a GPU of the target without the [smoke] precision
        gpus = [parse_gpu(gpu, matrix) for gpu in group[0].target.stack.gpus]
        for warning in precision_warnings(spec.smoke, gpus, f"{spec.path} target {name!r}"):
            warn(warning_text(warning))
    if write and wheelhouse is not None and entries:
        from envbuild.render.wheelgap import require_wheels

        require_wheels(wheelhouse, entries)  # a lock that outgrew the wheelhouse: before anything is written
    if write:
        for name, _ in targets:  # every destination is checked before any is written
            check_destination(out_dir, name)
    if write and bundle is not None and load_base is not None:
        for base in sorted({entry.base_image for entry in entries}):
            load_base(bundle, base)
    done = []
    for name, parts in targets:
        if write and len(parts) == 1:
            ((_, plan, files),) = parts
            write_context(files, out_dir, name, wheelhouse=wheelhouse, plan=plan)
        elif write:
            by_arch = {build.arch: (files, plan) for build, plan, files in parts}
            write_context({}, out_dir, name, wheelhouse=wheelhouse, platforms=by_arch)
        for build, plan, files in parts:
            done.append(
                Rendered(
                    plan=plan,
                    files=files,
                    where=build.context_dir(out_dir) if write else None,
                    name=build.context,
                )
            )
    return done
