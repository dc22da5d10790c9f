"""The `envbuild` command line.

Each subcommand imports what it needs when it runs, so `envbuild resolve` pays for neither
`docker`, `requests` nor `jinja2`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from envbuild import __version__
from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import EXIT_FAILURE, EXIT_NO_STACK, EXIT_OK, EnvbuildError

if TYPE_CHECKING:
    from envbuild.matrix.model import Matrix
    from envbuild.spec.lockfile import Lock


class _HelpFormatter(argparse.HelpFormatter):
    """argparse sizes help with shutil, whose import costs every `envbuild resolve` ~3 ms."""

    def __init__(self, prog: str, **kwargs) -> None:
        try:
            columns = os.get_terminal_size().columns
        except OSError:
            columns = 80
        kwargs.setdefault("width", max(columns - 2, 40))
        super().__init__(prog, **kwargs)


def _add_matrix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--matrix",
        metavar="DIR",
        help="compatibility data to use (default: the bundled matrix/; also ENVBUILD_MATRIX)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envbuild",
        formatter_class=_HelpFormatter,
        description="Reproducible, verified CUDA training environments.",
    )
    parser.add_argument("--version", action="version", version=f"envbuild {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    resolve = commands.add_parser(
        "resolve",
        formatter_class=_HelpFormatter,
        help="pick the best stack a driver runs, and say why the others were rejected",
        description="Pick the best framework/CUDA stack an NVIDIA driver runs, and explain why "
        "every other candidate was rejected. Exit 0: found; 2: bad input; 3: none.",
    )
    resolve.add_argument(
        "--driver",
        required=True,
        metavar="VERSION",
        help="host driver: 550, R550, 550.54 or 550.54.15 (a bare branch means "
        "a current driver of that branch)",
    )
    resolve.add_argument(
        "--gpu",
        action="append",
        metavar="NAME_OR_CC",
        default=[],
        help="a GPU the stack must run on: H100, 'RTX 4090', L4, sm_89, 8.9 (repeatable)",
    )
    resolve.add_argument(
        "--framework",
        action="append",
        metavar="NAME[SPEC]",
        default=[],
        help="torch, tensorflow or jax, with an optional PEP 440 specifier, "
        "e.g. 'torch==2.5.*' (repeatable; default: best of each)",
    )
    resolve.add_argument("--python", metavar="X.Y", help="Python version the stack must support")
    resolve.add_argument("--cuda", metavar="SPEC", help="CUDA runtime constraint: 12.4, '>=12.1'")
    resolve.add_argument(
        "--compat",
        choices=("native", "minor"),
        default="native",
        help="native (default) or minor: also allow same-major CUDA through minor-version compatibility",
    )
    resolve.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="stacks to show per framework (default 1, or 5 with --framework)",
    )
    resolve.add_argument(
        "--strategy",
        choices=("wheels", "base-image", "conda"),
        help="only stacks that fit this CUDA strategy (wheels: the framework brings its CUDA runtime; "
        "base-image: an nvidia/cuda cuDNN image exists for it)",
    )
    resolve.add_argument(
        "--os", metavar="NAME", help="base OS for --strategy base-image (default ubuntu22.04)"
    )
    resolve.add_argument("--json", action="store_true", help="print JSON instead of text")
    resolve.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every rejected candidate, not the first few per reason",
    )
    _add_matrix_option(resolve)

    render = commands.add_parser(
        "render",
        formatter_class=_HelpFormatter,
        help="render Dockerfiles and conda specs from envbuild.toml",
        description="Resolve each target of envbuild.toml and write its build context to DIR/<target>/: "
        "Dockerfile, requirement files or environment.yml, the smoke program, .dockerignore, stack.json.",
    )
    render.add_argument(
        "-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml"
    )
    render.add_argument("-o", "--output", default="build", metavar="DIR", help="default: build/")
    render.add_argument("--target", metavar="NAME", help="only this [[target]] (default: all)")
    render.add_argument(
        "--base-image", metavar="REF", help="replace the base image (mirrors, private registries)"
    )
    render.add_argument(
        "--wheelhouse",
        metavar="DIR",
        help="air-gapped: copy these wheels into the context and install with --no-index",
    )
    render.add_argument("--stdout", action="store_true", help="print the Dockerfile(s) instead of writing")
    render.add_argument(
        "--builder",
        choices=("buildkit", "api"),
        default="buildkit",
        help="render for BuildKit (default: RUN --mount for wheelhouses) or the classic builder",
    )
    _add_matrix_option(render)

    init = commands.add_parser(
        "init", formatter_class=_HelpFormatter, help="write a commented starter envbuild.toml"
    )
    init.add_argument("-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")

    lock = commands.add_parser(
        "lock",
        formatter_class=_HelpFormatter,
        help="write envbuild.lock: exact versions, sha256 hashes, base image digests",
        description="Resolve every target's Python closure for linux x86_64 with uv (framework from its "
        "variant's index, the rest from the spec's), pin base images by digest through the registry API, and "
        "write envbuild.lock next to the spec. --check: exit 1 when the lock no longer matches.",
    )
    lock.add_argument("-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml")
    lock.add_argument("--target", metavar="NAME", help="relock only this target")
    lock.add_argument(
        "--upgrade",
        nargs="*",
        metavar="PKG",
        help="allow newer versions: of these packages, or of everything when none are named",
    )
    lock.add_argument(
        "--check",
        action="store_true",
        help="do not write: exit 1 listing what changed when spec, matrix or lock disagree",
    )
    lock.add_argument(
        "--base-image", metavar="REF", help="replace the base image (mirrors, private registries)"
    )
    lock.add_argument(
        "--pylock",
        action="store_true",
        help="also export each target as PEP 751 pylock.<target>.toml next to the lock",
    )
    _add_matrix_option(lock)

    build = commands.add_parser(
        "build",
        formatter_class=_HelpFormatter,
        help="render, build, verify with the smoke step, and tag/push only what passed",
        description="render -> build (untagged) -> verify (the smoke training step in a container) -> "
        "promote (label, tag, push). An image whose smoke step fails gets no tag. "
        "Writes build/<target>/record.json.",
    )
    build.add_argument("-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml")
    which = build.add_mutually_exclusive_group()
    which.add_argument("--target", metavar="NAME", help="build this [[target]]")
    which.add_argument("--all", action="store_true", help="build every target and print a summary")
    build.add_argument("--smoke-device", choices=("gpu", "cpu"), help="default: [smoke] device (gpu)")
    build.add_argument(
        "--base-image", metavar="REF", help="replace the base image (mirrors, private registries)"
    )
    build.add_argument("--wheelhouse", metavar="DIR", help="air-gapped: install from these wheels")
    build.add_argument("--push", action="store_true", help="push every tag of a verified image")
    build.add_argument(
        "--builder",
        choices=("auto", "api", "buildkit"),
        default="auto",
        help="buildkit (docker CLI), api (Engine API, classic builder) or auto (default)",
    )
    build.add_argument("--no-cache", action="store_true", help="build without the layer cache")
    build.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="build N targets at once against one engine (with --all)",
    )
    build.add_argument("-o", "--output", default="build", metavar="DIR", help="default: build/")
    _add_matrix_option(build)

    verify = commands.add_parser(
        "verify",
        formatter_class=_HelpFormatter,
        help="run the smoke training step in a container from IMAGE",
        description="Run /opt/envbuild/smoke.py in a throwaway container (no network, the image's user; "
        "with --smoke-device gpu all GPUs). Exit 0 when every gate passed.",
    )
    verify.add_argument("image", metavar="IMAGE")
    verify.add_argument("--smoke-device", choices=("gpu", "cpu"), default="gpu", help="default: gpu")
    verify.add_argument("--steps", type=int, default=20, metavar="N")
    verify.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    verify.add_argument("--timeout", type=int, default=600, metavar="S")
    verify.add_argument("--report", metavar="FILE", help="write {image, device, report} here for `promote`")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")

    promote = commands.add_parser(
        "promote",
        formatter_class=_HelpFormatter,
        help="label and tag (and push) an image whose smoke report passed",
        description="Add io.envbuild.verified labels to IMAGE (no new layer), tag it, and push with --push. "
        "Refuses unless --report holds a passing smoke report for this image "
        "(from `envbuild verify --report`).",
    )
    promote.add_argument("image", metavar="IMAGE")
    promote.add_argument(
        "--report", metavar="FILE", help="written by envbuild verify --report (local promotion)"
    )
    promote.add_argument(
        "--to",
        nargs="+",
        action="extend",
        metavar="TAG",
        help="registry-side: copy the manifest of IMAGE (REPO@sha256:...) to these tags; the "
        "image must carry envbuild's verified label",
    )
    promote.add_argument("--tag", action="append", default=[], metavar="REPO:TAG", help="repeatable")
    promote.add_argument("--push", action="store_true")

    bake = commands.add_parser(
        "bake",
        formatter_class=_HelpFormatter,
        help="write a docker buildx bake file (JSON) for every target",
        description="One bake target per [[target]]: its rendered context, the candidate tag envbuild verify "
        "finds, the labels, and a registry cache. Render the contexts first (envbuild render).",
    )
    bake.add_argument("-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml")
    bake.add_argument(
        "-o", "--output", default="docker-bake.json", metavar="FILE", help="default: docker-bake.json"
    )
    bake.add_argument(
        "--contexts", default="build", metavar="DIR", help="where render wrote them (default build)"
    )
    _add_matrix_option(bake)

    ci = commands.add_parser("ci", formatter_class=_HelpFormatter, help="write CI workflows")
    ci_commands = ci.add_subparsers(dest="ci_command", metavar="SYSTEM")
    github = ci_commands.add_parser(
        "github",
        formatter_class=_HelpFormatter,
        help="a GitHub Actions workflow: lock-check, build on CPU, verify on GPU, promote by digest",
    )
    github.add_argument(
        "-f", "--file", default="envbuild.toml", metavar="SPEC", help="default: envbuild.toml"
    )
    github.add_argument("-o", "--output", default=".github/workflows/envbuild.yml", metavar="FILE")
    github.add_argument(
        "--gpu-label",
        action="append",
        metavar="LABEL",
        help="runner labels for the verify job (default: self-hosted, gpu, sm_XY of the targets)",
    )
    _add_matrix_option(github)

    doctor = commands.add_parser(
        "doctor",
        formatter_class=_HelpFormatter,
        help="check this host: nvidia-smi, driver, GPUs, Docker and the toolkit; can it run a lock or image",
        description="The field's host checklist, each line ok/warn/fail/skip with evidence and a fix. "
        "Exit 0 when nothing failed, 1 otherwise.",
    )
    subject = doctor.add_mutually_exclusive_group()
    subject.add_argument(
        "--lock", metavar="PATH", help="judge the stacks of this envbuild.lock against this host"
    )
    subject.add_argument("--image", metavar="REF", help="judge this image (labels, NVIDIA_REQUIRE_CUDA)")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    _add_matrix_option(doctor)

    smoke = commands.add_parser(
        "smoke",
        formatter_class=_HelpFormatter,
        help="run the smoke training step on this host (no container)",
        description="Run the framework's smoke program with this Python: forward, backward and optimizer "
        "steps with gates for device, driver, arch, placement, training, precision, memory and multi-GPU. "
        "Exit 0 when every gate passed, 1 otherwise.",
    )
    smoke.add_argument(
        "--framework",
        choices=("torch", "tensorflow", "jax"),
        help="default: the first of torch, tensorflow, jax this Python can import",
    )
    smoke.add_argument("--device", choices=("gpu", "cpu", "auto"), default="gpu", help="default: gpu")
    smoke.add_argument("--steps", type=int, metavar="N", help="training steps (default 20)")
    smoke.add_argument("--precision", choices=("fp32", "fp16", "bf16"), help="default: fp32")
    smoke.add_argument("--timeout", type=int, default=600, metavar="S", help="seconds (default 600)")
    smoke.add_argument("--json", action="store_true", help="print the report as JSON")

    matrix = commands.add_parser(
        "matrix", formatter_class=_HelpFormatter, help="inspect and validate the compatibility data"
    )
    matrix_commands = matrix.add_subparsers(dest="matrix_command", metavar="ACTION")
    check = matrix_commands.add_parser(
        "check",
        formatter_class=_HelpFormatter,
        help="validate the schema and cross-references of matrix/*.toml",
    )
    _add_matrix_option(check)
    gpus = matrix_commands.add_parser(
        "gpus", formatter_class=_HelpFormatter, help="list the GPUs and their compute capabilities"
    )
    _add_matrix_option(gpus)
    refresh = matrix_commands.add_parser(
        "refresh",
        formatter_class=_HelpFormatter,
        help="propose new rows from PyPI, the PyTorch indexes and the nvidia/cuda tag list",
        description="Read upstream and print the rows it proposes, each with its source URL and fetch "
        "date: + rows --write adds, ? rows --write adds commented out for a human to finish, ! findings "
        "that are only reported. Nothing is written unless every edited file passes `matrix check`.",
    )
    _add_matrix_option(refresh)
    refresh.add_argument(
        "--source",
        metavar="LIST",
        help="comma-separated: pypi, pytorch-index, nvidia-cuda-tags (default: all)",
    )
    refresh.add_argument(
        "--write", action="store_true", help="apply the + and ? findings to the matrix files"
    )
    refresh.add_argument("--json", action="store_true", help="print the findings as JSON")
    refresh.add_argument(
        "--pypi-url", metavar="URL", help="PyPI base URL (default https://pypi.org; also ENVBUILD_PYPI_URL)"
    )
    refresh.add_argument(
        "--pytorch-index-url",
        metavar="URL",
        help="base of the per-CUDA PyTorch indexes (default https://download.pytorch.org/whl; "
        "also ENVBUILD_PYTORCH_INDEX_URL)",
    )
    refresh.add_argument(
        "--cuda-repository",
        metavar="REPO",
        help="the nvidia/cuda repository to list (default docker.io/nvidia/cuda; "
        "also ENVBUILD_CUDA_REPOSITORY)",
    )
    refresh.add_argument(
        "--timeout", type=float, default=30, metavar="S", help="seconds per request (default 30)"
    )
    return parser


def _cmd_resolve(args: argparse.Namespace) -> int:
    from envbuild.matrix.load import load_matrix
    from envbuild.resolve.query import build_query
    from envbuild.resolve.report import to_json, to_text
    from envbuild.resolve.solver import resolve

    matrix = load_matrix(args.matrix)
    query = build_query(
        matrix,
        driver=args.driver,
        gpus=args.gpu,
        frameworks=args.framework,
        python=args.python,
        cuda=args.cuda,
        compat=args.compat,
        limit=args.limit,
        strategy=args.strategy,
        os=args.os,
    )
    resolution = resolve(matrix, query)
    output = to_json(resolution, matrix) if args.json else to_text(resolution, matrix, verbose=args.verbose)
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return EXIT_OK if resolution.stacks else EXIT_NO_STACK


def _cmd_render(args: argparse.Namespace) -> int:
    from envbuild.matrix.load import load_matrix
    from envbuild.render.context import check_output_dir, render_files, write_context
    from envbuild.render.plan import build_plan
    from envbuild.spec.model import load_spec

    spec = load_spec(args.file)
    matrix = load_matrix(args.matrix)
    check_output_dir(args.output)
    lock = _lock_for_render(args.file, spec, matrix)
    plans = [
        build_plan(
            matrix,
            spec,
            target,
            base_image=args.base_image,
            wheelhouse=args.wheelhouse is not None,
            lock=lock.target(target.name) if lock else None,
            buildkit=args.builder == "buildkit",
        )
        for target in spec.target(args.target)
    ]  # every target resolves before anything is written
    rendered = [(plan, render_files(plan)) for plan in plans]
    for plan, files in rendered:
        if args.stdout:
            sys.stdout.write(f"# ---- {plan.target}/Dockerfile\n" if len(rendered) > 1 else "")
            sys.stdout.write(files["Dockerfile"].decode())
            continue
        where = write_context(files, args.output, plan.target, wheelhouse=args.wheelhouse, plan=plan)
        doc = plan.stack_document
        print(
            f"{where}: {doc['framework']} {doc['framework_version']} ({doc['variant']}, CUDA {doc['cuda']}), "
            f"Python {plan.python}, {plan.strategy} on {plan.base_image}"
        )
    return EXIT_OK


def _cmd_lock(args: argparse.Namespace) -> int:
    from envbuild.lock.locker import check_lock, lock_spec, relock_summary
    from envbuild.matrix.load import load_matrix
    from envbuild.spec.lockfile import load_lock, lock_path, write_lock
    from envbuild.spec.model import load_spec

    spec = load_spec(args.file)
    matrix = load_matrix(args.matrix)
    path = lock_path(args.file)
    if args.check:
        lock, intact = load_lock(path)
        _warn_base_images(lock, matrix)
        problems = check_lock(lock, intact, spec, matrix)
        if problems:
            sys.stderr.write(f"error: {path} is out of date:\n")
            sys.stderr.writelines(f"  - {p}\n" for p in problems)
            sys.stderr.write("  fix: run `envbuild lock` and commit envbuild.lock\n")
            return EXIT_FAILURE
        print(f"{path} matches {args.file} and the matrix ({len(lock.targets)} target(s))")
        return EXIT_OK
    previous = None
    if os.path.exists(path):
        from envbuild.errors import EnvbuildError

        try:
            previous, _ = load_lock(path)
        except EnvbuildError:
            previous = None  # a broken lock is replaced, not a reason to stop
    upgrade_all = args.upgrade is not None and not args.upgrade
    lock = lock_spec(
        matrix,
        spec,
        target_name=args.target,
        base_image=args.base_image,
        previous=previous,
        upgrade=upgrade_all,
        upgrade_packages=tuple(args.upgrade or ()),
    )
    write_lock(path, lock)
    for line in relock_summary(previous, lock):
        print(line)
    print(f"wrote {path}")
    _warn_base_images(lock, matrix)
    if args.pylock:
        from envbuild._util.files import write_atomic
        from envbuild.lock.uv import export_pylock, pylock_name

        for target in lock.targets:
            out = os.path.join(os.path.dirname(path), pylock_name(target.name))
            write_atomic(out, export_pylock(target))
            print(f"wrote {out}")
    return EXIT_OK


def _warn_base_images(lock: Lock, matrix: Matrix) -> None:
    """Warnings, not failures: a lock whose base image is past EOL still builds until NVIDIA deletes
    the tag, and the team should hear about it before that day, not on it."""
    from envbuild.matrix.lifecycle import base_image_warning, today

    day = today()
    for target in lock.targets:
        warning = base_image_warning(matrix, target.base_image, day)
        if warning:
            sys.stderr.write(f"warning: target {target.name}: {warning.message}\n  fix: {warning.fix}\n")


def _cmd_build(args: argparse.Namespace) -> int:
    from envbuild.errors import UsageError
    from envbuild.matrix.load import load_matrix
    from envbuild.pipeline import build_all, build_target, lock_file_digest, summary_table
    from envbuild.spec.model import load_spec

    spec = load_spec(args.file)
    matrix = load_matrix(args.matrix)
    if args.jobs < 1:
        raise UsageError(f"-j {args.jobs} must be 1 or more", fix="e.g. -j 2")
    if args.target is None and not args.all and len(spec.targets) > 1:
        names = ", ".join(t.name for t in spec.targets)
        raise UsageError(
            f"{args.file} has {len(spec.targets)} targets", fix=f"pass --all or --target ({names})"
        )
    lock = _lock_for_render(args.file, spec, matrix)
    from envbuild.spec.lockfile import lock_path

    digest = lock_file_digest(lock_path(args.file)) if lock else None
    device = args.smoke_device or spec.smoke.device
    parallel = args.jobs > 1

    def build_one(target):
        say = (lambda line: print(f"[{target.name}] {line}", flush=True)) if parallel else print
        return build_target(
            matrix,
            spec,
            target,
            out_dir=args.output,
            builder=args.builder,
            smoke_device=device,
            push=args.push,
            base_image=args.base_image,
            wheelhouse=args.wheelhouse,
            no_cache=args.no_cache,
            lock=lock.target(target.name) if lock else None,
            lock_digest=digest,
            say=say,
            progress=(lambda line: say(line)) if parallel else None,
        )

    results = build_all(spec.target(args.target), build_one, jobs=args.jobs)
    records, failed = [], False
    for record, error in results:
        record.setdefault("smoke_device", device)
        records.append(record)
        if error:
            failed = True
            sys.stderr.write(error + "\n")
    if args.all or len(records) > 1:
        sys.stdout.write(summary_table(records))
    return EXIT_FAILURE if failed else EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    import json

    from envbuild.image.verify import verify_image
    from envbuild.smoke.run import summary

    result = verify_image(
        args.image, device=args.smoke_device, steps=args.steps, precision=args.precision, timeout=args.timeout
    )
    if args.report:
        import docker

        image_id = docker.from_env(timeout=30).images.get(args.image).id
        from envbuild._util.files import write_atomic

        saved = {"image": image_id, "device": args.smoke_device, "report": result.report}
        write_atomic(args.report, json.dumps(saved, indent=2) + "\n")
    sys.stdout.write(json.dumps(result.report, indent=2) + "\n" if args.json else summary(result.report))
    return EXIT_OK if result.passed else EXIT_FAILURE


def _load_verify_report(path: str) -> dict:
    import json

    from envbuild.errors import UsageError

    try:
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
        if not isinstance(saved["report"], dict) or not str(saved["image"]).startswith("sha256:"):
            raise ValueError("no report or image id")
        return saved
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"--report {path} is not a report from `envbuild verify --report` ({exc})",
            fix="run envbuild verify IMAGE --report FILE first",
        ) from None


def _cmd_promote(args: argparse.Namespace) -> int:

    import docker

    from envbuild.errors import EnvbuildError, UsageError
    from envbuild.image.promote import promote

    if args.to:
        from envbuild.oci.registry import promote_by_digest

        verified = None
        if args.report:
            saved = _load_verify_report(args.report)
            if not saved["report"].get("passed"):
                raise EnvbuildError(
                    f"{args.report}: the smoke step did not pass; refusing to promote",
                    fix="fix the image, build and verify again",
                )
            verified = saved["image"]
        for ref, digest in promote_by_digest(args.image, list(args.to), verified_image_id=verified):
            print(f"promoted {ref}@{digest}")
        return EXIT_OK
    if not args.report:
        raise UsageError(
            "promote needs --report FILE (from envbuild verify --report), or --to TAG for a "
            "REPO@sha256:... in a registry",
            fix="see envbuild promote --help",
        )
    saved = _load_verify_report(args.report)
    report, device, image_id = saved["report"], saved.get("device", "gpu"), saved["image"]
    if docker.from_env(timeout=30).images.get(args.image).id != image_id:
        raise UsageError(
            f"--report {args.report} was made for {image_id[:19]}, not {args.image}",
            fix="verify this image, then promote it",
        )
    if not args.tag:
        raise UsageError("promote needs at least one --tag REPO:TAG", fix="e.g. --tag ghcr.io/acme/train:v1")
    promotion = promote(image_id, tags=args.tag, report=report, device=device, push=args.push)
    for tag in promotion.tags:
        print(f"tagged {tag}" + (" (verified on CPU only)" if device == "cpu" else ""))
    for tag, digest in promotion.pushed:
        print(f"pushed {tag}@{digest}")
    return EXIT_OK


def _cmd_bake(args: argparse.Namespace) -> int:
    from envbuild._util.files import write_atomic
    from envbuild.matrix.load import load_matrix
    from envbuild.scaleout.github import bake_json
    from envbuild.spec.model import load_spec

    text = bake_json(load_matrix(args.matrix), load_spec(args.file), out_dir=args.contexts)
    write_atomic(args.output, text)
    print(f"wrote {args.output}; run: docker buildx bake -f {args.output} --push")
    return EXIT_OK


def _cmd_ci(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.ci_command != "github":
        parser.parse_args(["ci", "--help"])
        return EXIT_OK
    from envbuild._util.files import write_atomic
    from envbuild.matrix.load import load_matrix
    from envbuild.scaleout.github import github_workflow_yaml
    from envbuild.spec.model import load_spec

    text = github_workflow_yaml(
        load_matrix(args.matrix), load_spec(args.file), spec_path=args.file, gpu_labels=args.gpu_label
    )
    write_atomic(args.output, text)
    print(f"wrote {args.output}")
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    from envbuild.host.doctor import run_doctor, to_json, to_text
    from envbuild.matrix.load import load_matrix

    checks = run_doctor(load_matrix(args.matrix), lock=args.lock, image=args.image)
    sys.stdout.write(to_json(checks) + "\n" if args.json else to_text(checks))
    return EXIT_FAILURE if any(c.status == "fail" for c in checks) else EXIT_OK


def _cmd_smoke(args: argparse.Namespace) -> int:
    import json

    from envbuild.smoke.run import run_smoke, summary

    report, _ = run_smoke(
        args.framework, device=args.device, steps=args.steps, precision=args.precision, timeout=args.timeout
    )
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else summary(report))
    return EXIT_OK if report["passed"] else EXIT_FAILURE


def _lock_for_render(spec_file: str, spec, matrix):
    """envbuild.lock next to the spec, when there is one: render installs its exact, hashed pins."""
    from envbuild.errors import LockError
    from envbuild.spec.lockfile import load_lock, lock_path

    path = lock_path(spec_file)
    if not os.path.exists(path):
        return None
    lock, intact = load_lock(path)
    if lock.spec_digest != spec.digest or lock.matrix_digest != matrix.digest:
        raise LockError(
            f"{path} does not match {spec_file} and the matrix",
            fix="run `envbuild lock` (or remove envbuild.lock to render unlocked)",
        )
    if not intact:
        sys.stderr.write(f"warning: {path} was edited by hand; pip's hash check will judge it\n")
    return lock


def _cmd_init(args: argparse.Namespace) -> int:
    from envbuild.spec.starter import write_starter

    print(f"wrote {write_starter(args.file, force=args.force)}; next: envbuild render -f {args.file}")
    return EXIT_OK


def _cmd_matrix_refresh(args: argparse.Namespace) -> int:
    from envbuild.matrix.lifecycle import today
    from envbuild.matrix.load import default_matrix_dir
    from envbuild.refresh.run import refresh, settings_from, to_json, to_text

    root = args.matrix or default_matrix_dir()
    if args.write and os.sep + "_data" + os.sep in os.path.abspath(root) + os.sep:
        from envbuild.errors import UsageError

        raise UsageError(
            f"--write would edit the matrix inside the installed package ({root})",
            fix="run it in a checkout, or pass --matrix DIR (a copy of matrix/ you commit)",
        )
    settings = settings_from(
        args.source, args.pypi_url, args.pytorch_index_url, args.cuda_repository, timeout=args.timeout
    )
    day = today().isoformat()
    findings = refresh(root, settings, day)
    written = False
    if args.write:
        from envbuild.refresh.edit import edited_texts, write_checked

        texts = edited_texts(root, findings)
        if texts:
            write_checked(root, texts)
            written = True
    render = to_json if args.json else to_text
    sys.stdout.write(render(findings, day=day, sources=settings.sources, written=written))
    return EXIT_OK


def _cmd_matrix(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from envbuild.matrix.load import load_matrix

    if args.matrix_command == "check":
        from envbuild.errors import MatrixError
        from envbuild.matrix.check import check_matrix, summary

        try:
            matrix = load_matrix(args.matrix)
        except MatrixError as exc:  # a check that finds bad data failed, it was not misused
            sys.stderr.write(exc.render() + "\n")
            return EXIT_FAILURE
        errors = check_matrix(matrix)
        if errors:
            sys.stderr.write(f"error: matrix {matrix.root} has {len(errors)} problem(s):\n")
            sys.stderr.writelines(f"  {e}\n" for e in errors)
            sys.stderr.write("  fix: correct the rows named above (schema: matrix/README.md)\n")
            return EXIT_FAILURE
        print(f"matrix OK: {summary(matrix)}")
        return EXIT_OK
    if args.matrix_command == "refresh":
        return _cmd_matrix_refresh(args)
    if args.matrix_command == "gpus":
        matrix = load_matrix(args.matrix)
        for gpu in sorted(matrix.gpus, key=lambda g: (g.cc, g.name)):
            aliases = f"  (also: {', '.join(gpu.aliases)})" if gpu.aliases else ""
            print(f"{f'{gpu.cc[0]}.{gpu.cc[1]}':<6}{gpu.name}{aliases}")
        return EXIT_OK
    parser.parse_args(["matrix", "--help"])
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "resolve":
            return _cmd_resolve(args)
        if args.command == "render":
            return _cmd_render(args)
        if args.command == "lock":
            return _cmd_lock(args)
        if args.command == "build":
            return _cmd_build(args)
        if args.command == "verify":
            return _cmd_verify(args)
        if args.command == "promote":
            return _cmd_promote(args)
        if args.command == "bake":
            return _cmd_bake(args)
        if args.command == "ci":
            return _cmd_ci(args, parser)
        if args.command == "doctor":
            return _cmd_doctor(args)
        if args.command == "smoke":
            return _cmd_smoke(args)
        if args.command == "init":
            return _cmd_init(args)
        if args.command == "matrix":
            return _cmd_matrix(args, parser)
        parser.print_help()
        return EXIT_OK
    except EnvbuildError as exc:
        sys.stderr.write(exc.render() + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: still no traceback unless asked for
        if os.environ.get("ENVBUILD_DEBUG"):
            raise
        sys.stderr.write(
            f"error: internal error: {type(exc).__name__}: {exc}\n"
            "  fix: this is a bug in envbuild; rerun with ENVBUILD_DEBUG=1 and report "
            "the traceback\n"
        )
        return EXIT_FAILURE
