"""The runs of `envbuild ci github|gitlab|k8s|slurm`: each generator's files, written with a marker line
that records the command, or compared with what is committed (`ci --check`, and `lock --check` for
every generated file it finds beside the spec).

A marker records a command line, so it lives with the CLI: only the CLI's parser can read one back
into the options that command ran with. The recorded command is canonical, not as typed: every option
that differs from its default, in the parser's order, with its paths relative to the repository root
(a CI runner's checkout is elsewhere), and ENVBUILD_MATRIX / ENVBUILD_BASE_IMAGE as the flags they
stand for (the runner has neither variable).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.cli.inputs import matrix_of, spec_of
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    from envbuild.scaleout.generated import Generation

# the options whose values are paths a generated file's command names (made root-relative)
PATH_OPTIONS = frozenset({"file", "output", "matrix", "action_pins"})
# what a generator would otherwise read from the environment: (attribute, variable)
FROM_ENVIRONMENT = (("matrix", "ENVBUILD_MATRIX"), ("base_image", "ENVBUILD_BASE_IMAGE"))


def _inputs(args: argparse.Namespace) -> tuple:
    """(matrix, spec): the spec's [site] matrix counts, as for every command that reads the spec."""
    spec = spec_of(args)
    return matrix_of(args, spec), spec


def github_files(args: argparse.Namespace) -> None:
    from envbuild.scaleout.github import write_workflow

    write_workflow(
        *_inputs(args),
        args.output,
        gpu_labels=args.gpu_label,
        install=args.install,
        base_image=args.base_image,
        matrix_dir=args.matrix,
        action_pins=args.action_pins,
        qemu=args.qemu,
        sign_key_secret=args.sign_key_secret,
    )


def gitlab_files(args: argparse.Namespace) -> None:
    from envbuild.scaleout.gitlab import write_pipeline

    write_pipeline(
        *_inputs(args),
        args.output,
        gpu_tags=args.gpu_tag,
        install=args.install,
        base_image=args.base_image,
        matrix_dir=args.matrix,
    )


def k8s_files(args: argparse.Namespace) -> None:
    from envbuild.scaleout.k8s import write_jobs

    write_jobs(
        *_inputs(args),
        args.output,
        gpu_types=args.gpu_type,
        node_selectors=args.node_selector,
        runtime_class=args.runtime_class,
        namespace=args.namespace,
        pull_secret=args.image_pull_secret,
        images=args.image,
    )


def slurm_files(args: argparse.Namespace) -> None:
    from envbuild.scaleout.slurm import write_scripts

    write_scripts(
        *_inputs(args),
        args.output,
        shared_dir=args.shared_dir,
        runtime=args.runtime,
        partitions=args.partition,
        gres=args.gres,
        time=args.time,
        account=args.account,
        spec_path=args.file,
    )


# `ci SYSTEM` -> (what writes its files through scaleout.generated.emit, whether -o is a directory)
GENERATORS = {
    "ci github": (github_files, False),
    "ci gitlab": (gitlab_files, False),
    "ci k8s": (k8s_files, True),
    "ci slurm": (slurm_files, True),
}


def take_environment(args: argparse.Namespace) -> None:
    """ENVBUILD_MATRIX and ENVBUILD_BASE_IMAGE into args where no flag was given: the generated file
    must name what the generator was run with."""
    for attribute, variable in FROM_ENVIRONMENT:
        if hasattr(args, attribute) and getattr(args, attribute) is None and os.environ.get(variable):
            setattr(args, attribute, os.environ[variable])


def repository_of(args: argparse.Namespace) -> str:
    from envbuild.scaleout.repopaths import repo_root

    _, directory = GENERATORS[args.command_path]
    return repo_root(os.path.join(args.output, "-") if directory else args.output)


def _root_relative(value: str, root: str) -> str:
    """`value` relative to `root` when it is a path inside it; else as given (absolute when it exists)."""
    absolute = os.path.realpath(value)
    relative = os.path.relpath(absolute, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return absolute if os.path.exists(value) else value
    return relative.replace(os.sep, "/")


def recorded_argv(args: argparse.Namespace, root: str) -> list[str]:
    """The canonical command line of this run (see the module docstring), without --check."""
    from envbuild.cli.parser import build_parser

    _, parsers = build_parser(args.command_path.split())
    words = list(args.command_path.split())
    for action in parsers[args.command_path]._actions:
        if not action.option_strings or action.dest in ("help", "check"):
            continue
        value = getattr(args, action.dest, None)
        if (
            value is None
            or value is False
            or (value == action.default and action.dest not in ("file", "output"))
        ):
            continue
        flag = max(action.option_strings, key=len)
        if value is True:
            words.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            item = str(item)
            if action.dest in PATH_OPTIONS or (action.dest == "install" and os.path.exists(item)):
                item = _root_relative(item, root)
            words += [flag, item]
    return words


def run_generator(args: argparse.Namespace) -> tuple[Generation, str]:
    """Run the generator `args` names: written, or only recorded under args.check. It runs as its
    recorded command does, parsed from that command line in the repository root, so what it writes is
    exactly what `lock --check` makes again. Returns the run (its files by absolute path) and the
    command."""
    from envbuild.scaleout.generated import generation, marker_line

    take_environment(args)
    files, _ = GENERATORS[args.command_path]
    with generation(None, check=True):  # as typed first: a bad -o or flag is refused in the user's words
        files(args)
    root = repository_of(args)
    argv = recorded_argv(args, root)
    canonical = _parsed(argv)
    previous = os.getcwd()
    try:
        os.chdir(root)
        with generation(marker_line(argv), check=args.check) as run:
            files(canonical)
    finally:
        os.chdir(previous)
    return run, f"envbuild {' '.join(argv)}"


def _parsed(argv: list[str]) -> argparse.Namespace:
    from envbuild.cli.parser import build_parser

    parser, _ = build_parser(argv)
    with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage text is not ours to print
        return parser.parse_args(argv)


class StaleGenerated(Record):
    """A generated file that is not what its command writes now: why, and the command that fixes it."""

    __slots__ = ("path", "why", "command")
    path: str
    why: str
    command: str


def stale_generated(spec_path: str) -> list[StaleGenerated]:
    """Every file in the spec's repository that `envbuild ci` generated from this spec and that is not
    what the same command writes now (missing, differing, or no longer generated), in path order."""
    from envbuild.scaleout.generated import find_generated, generation, parse_marker
    from envbuild.scaleout.repopaths import repo_root

    spec = os.path.realpath(spec_path)
    root = repo_root(spec)
    found: list[StaleGenerated] = []
    for marker, paths in sorted(find_generated(root).items()):
        argv = parse_marker(marker)
        if argv is None:
            continue
        command = f"envbuild {' '.join(argv)}"
        try:
            args = _parsed(argv)
        except SystemExit:  # a marker this envbuild no longer reads
            found += [
                StaleGenerated(path=p, why="its command is no longer valid", command=command) for p in paths
            ]
            continue
        if os.path.realpath(os.path.join(root, args.file)) != spec:
            continue  # another spec's file
        files, _ = GENERATORS[args.command_path]
        previous = os.getcwd()
        try:
            os.chdir(root)
            with generation(marker, check=True) as run:
                files(args)
            stale = [(item.path, item.why) for item in run.stale()]
        except (EnvbuildError, OSError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            stale = [(path, f"cannot be made again: {message}") for path in paths]
        finally:
            os.chdir(previous)
        found += [StaleGenerated(path=os.path.normpath(p), why=why, command=command) for p, why in stale]
    return sorted(found, key=lambda item: item.path)
