"""One handler per command: read the parsed arguments, call one library function, print its result.

Handlers hold no domain logic: they never call Docker, never re-check what the library checked, and
never know where package data lives. Each imports what it needs when it runs, so `envbuild resolve`
pays for neither `docker`, `requests` nor `jinja2`.
"""

from __future__ import annotations

import argparse
import sys

from envbuild.cli.inputs import matrix_of, spec_of
from envbuild.errors import EXIT_FAILURE, EXIT_NO_STACK, EXIT_OK


def _print(line: str) -> None:
    print(line, flush=True)


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


_load, _spec = matrix_of, spec_of  # the matrix and the spec the arguments name (cli.inputs)


def _lock_key(args: argparse.Namespace) -> bytes | None:
    from envbuild.lockfile.seal import lock_key

    return lock_key(args.lock_key_file)


def _sign_key(args: argparse.Namespace, *, push: bool | None = None) -> str | None:
    """--sign-key, checked before anything is built or pushed: a key that cannot sign is exit 2 now,
    not after a build; and it signs only what a push attaches (push: the build's settings', which
    ENVBUILD_PUSH may set; else --push)."""
    if not getattr(args, "sign_key", None):
        return None
    from envbuild.errors import UsageError

    pushes = args.push if push is None else push
    if not pushes and not getattr(args, "attach", False):
        raise UsageError(
            "--sign-key signs the SBOM and provenance attached in the registry, and nothing is pushed",
            fix="add --push, or drop --sign-key (the files next to record.json are the plain documents)",
        )
    from envbuild.attest.dsse import load_signing_key

    load_signing_key(args.sign_key)
    return str(args.sign_key)


def _warn_base_images(lock, matrix, spec) -> None:
    from envbuild.matrix.lifecycle import today
    from envbuild.plan.eolfix import lock_advice

    images = [(target.name, target.base_image) for target in lock.targets]
    shown = set()
    for name, warning in lock_advice(matrix, spec, images, today()):
        if (name, warning.message) not in shown:  # a target's platforms share their base's tag
            shown.add((name, warning.message))
            sys.stderr.write(f"warning: target {name}: {warning.message}\n  fix: {warning.fix}\n")


def resolve(args: argparse.Namespace) -> int:
    from envbuild.errors import UsageError

    if args.file is not None:
        return resolve_spec(args)
    if args.target is not None:
        raise UsageError("resolve --target needs -f SPEC", fix="add -f envbuild.toml, or drop --target")
    if args.driver is None:
        raise UsageError(
            "resolve needs --driver VERSION, or -f SPEC to explain a spec's targets",
            fix="e.g. envbuild resolve --driver 550, or envbuild resolve -f envbuild.toml",
        )
    from envbuild.resolve.query import build_query
    from envbuild.resolve.report import to_json, to_text
    from envbuild.resolve.solver import resolve

    matrix = _load(args)
    query = build_query(
        matrix,
        driver=args.driver,
        gpus=args.gpu,
        frameworks=args.framework,
        python=args.python,
        cuda=args.cuda,
        compat=args.compat or "native",
        limit=args.limit,
        strategy=args.strategy,
        os=args.os,
        platform=args.platform,
    )
    resolution = resolve(matrix, query)
    output = to_json(resolution, matrix) if args.json else to_text(resolution, matrix, verbose=args.verbose)
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return EXIT_OK if resolution.stacks else EXIT_NO_STACK


def resolve_spec(args: argparse.Namespace) -> int:
    """resolve -f: one section per target; flags override the spec's fields."""
    from envbuild.resolve.targets import resolve_targets, to_json_targets, to_text_targets

    spec = _spec(args)
    matrix = _load(args, spec)
    overrides = {
        "driver": args.driver,
        "gpus": args.gpu,
        "frameworks": args.framework,
        "python": args.python,
        "cuda": args.cuda,
        "compat": args.compat,
        "strategy": args.strategy,
        "os": args.os,
        "platform": args.platform,
    }
    results = resolve_targets(matrix, spec, target=args.target, overrides=overrides, limit=args.limit)
    if args.json:  # the document carries the warnings: stdout and stderr stay the document and errors
        sys.stdout.write(to_json_targets(results, matrix, spec) + "\n")
    else:
        sys.stdout.write(to_text_targets(results, matrix, spec, verbose=args.verbose))
        from envbuild.resolve.precision import warning_text

        for result in results:
            for warning in result.warnings:
                _warn(warning_text(warning))
    return EXIT_OK if all(r.resolution.stacks for r in results) else EXIT_NO_STACK


def render(args: argparse.Namespace) -> int:
    from envbuild.render.context import render_spec

    spec = _spec(args)
    if args.apptainer:
        from envbuild.render.apptainer import check_labels

        check_labels(spec)  # before anything is written
    if args.bundle is not None and args.wheelhouse is not None:
        from envbuild.errors import UsageError

        raise UsageError(
            "--bundle and --wheelhouse both give the wheels: a bundle's wheels/ is its wheelhouse",
            fix="drop --wheelhouse (the bundle's wheels/ is used), or drop --bundle",
        )
    rendered = render_spec(
        _load(args, spec),
        spec,
        args.file,
        out_dir=args.output,
        write=not args.stdout,
        target=args.target,
        base_image=args.base_image,
        wheelhouse=args.wheelhouse,
        bundle=args.bundle,
        load_base=_bundle_loader(args),
        buildkit=args.builder == "buildkit",
        lock_key=_lock_key(args),
        allow_edited_lock=args.allow_edited_lock,
        warn=_warn,
    )
    for context in rendered:
        plan = context.plan
        if args.stdout:
            sys.stdout.write(f"# ---- {context.name}/Dockerfile\n" if len(rendered) > 1 else "")
            sys.stdout.write(context.files["Dockerfile"].decode())
            if args.apptainer:
                from envbuild.render.apptainer import DEF_FILE, definition

                sys.stdout.write(f"# ---- {context.name}/{DEF_FILE}\n" + definition(plan, spec, context.name))
            continue
        if args.apptainer and context.where:
            import os

            from envbuild._util.files import write_atomic
            from envbuild.render.apptainer import DEF_FILE, definition

            write_atomic(os.path.join(context.where, DEF_FILE), definition(plan, spec, context.name))
        doc = plan.stack_document
        print(
            f"{context.where}: {doc['framework']} {doc['framework_version']} ({doc['variant']}, CUDA "
            f"{doc['cuda']}), Python {plan.python}, {plan.strategy} on {plan.base_image}"
        )
    return EXIT_OK


def _bundle_loader(args: argparse.Namespace):
    """render --bundle loads the base into the engine when it writes the context, so that a plain
    `docker build` of it finds FROM's bundle-local tag; --stdout writes nothing and loads nothing."""
    if args.bundle is None or args.stdout:
        return None
    from envbuild.image.bundlebase import load_base

    return load_base


def _lock_progress(args: argparse.Namespace):
    """Progress lines on stderr, one per layer and target (live on a terminal); none with --quiet,
    nor with --json, whose readers want stdout and stderr to be only the document and errors."""
    from envbuild._util.progress import Progress

    return Progress(None if args.quiet or args.json else sys.stderr)


def lock(args: argparse.Namespace) -> int:
    spec = _spec(args)
    matrix = _load(args, spec)
    if args.check:
        return _lock_check(args, spec, matrix)
    if args.json:
        from envbuild.errors import UsageError

        raise UsageError("--json goes with --check", fix="use `envbuild lock --check --json`")
    from envbuild.lock.locker import relock, relock_summary

    progress = _lock_progress(args)
    try:
        previous, new, path = relock(
            matrix,
            spec,
            target_name=args.target,
            base_image=args.base_image,
            upgrade=args.upgrade is not None and not args.upgrade,
            upgrade_packages=tuple(args.upgrade or ()),
            key=_lock_key(args),
            progress=progress,
        )
    finally:
        progress.close()  # a step that raised: its live line goes before the error prints
    if new is previous:  # up to date: nothing resolved, nothing written (locker.up_to_date)
        count = len({t.name for t in new.targets})  # a target locked for two platforms is one target
        print(
            f"{path} is up to date with {args.file} and the matrix ({count} target{'s' * (count != 1)}); "
            "nothing resolved"
        )
    else:
        for line in relock_summary(previous, new):
            print(line)
        print(f"wrote {path}")
    _warn_base_images(new, matrix, spec)
    if args.pylock:
        from envbuild.lock.uv import write_pylocks

        for written in write_pylocks(new, path):
            print(f"wrote {written}")
    return EXIT_OK


def vendor(args: argparse.Namespace) -> int:
    from envbuild._util.progress import Progress
    from envbuild.vendor.run import vendor_spec

    summary = vendor_spec(
        args.file, args.output, target=args.target, progress=Progress(None if args.quiet else sys.stderr)
    )
    print(summary.line())
    return EXIT_OK


def _lock_check(args: argparse.Namespace, spec, matrix) -> int:
    """`lock --check [--json]`: exit 1 listing what is out of date. With --json the list is one JSON
    document on stdout, a lock that cannot be read included (kind "unreadable"), with the same exit
    codes; bad input (a --target the spec lacks) is still exit 2 with its message on stderr."""
    import json

    from envbuild.errors import LockError
    from envbuild.lock.locker import check_lock_file, mirror_note
    from envbuild.lockfile.model import lock_path
    from envbuild.lockfile.problem import problem

    progress = _lock_progress(args)
    try:
        current, problems, path = check_lock_file(
            spec,
            matrix,
            key=_lock_key(args),
            base_image=args.base_image,
            offline=args.offline,
            target_name=args.target,
            progress=progress,
        )
    except LockError as exc:
        if not args.json:
            raise
        unreadable = problem("unreadable", exc.message).to_dict()
        document = {"ok": False, "lock": lock_path(spec.path), "spec": args.file, "problems": [unreadable]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return EXIT_FAILURE
    finally:
        progress.close()  # a step that raised: its live line goes before the error prints
    _warn_base_images(current, matrix, spec)
    from envbuild.cli.generators import stale_generated

    generated = [
        problem(
            "generated",
            f"{item.path} is stale ({item.why}); run `{item.command}`",
            field="file",
            locked=item.path,
            wanted=item.command,
        )
        for item in stale_generated(spec.path)
    ]
    problems = [*problems, *generated]
    if args.json:
        document = {
            "ok": not problems,
            "lock": path,
            "spec": args.file,
            "problems": [p.to_dict() for p in problems],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return EXIT_FAILURE if problems else EXIT_OK
    if problems:
        sys.stderr.write(f"error: {path} is out of date:\n")
        sys.stderr.writelines(f"  - {p.message}\n" for p in problems)
        if not generated:
            sys.stderr.write("  fix: run `envbuild lock` and commit envbuild.lock\n")
        elif len(generated) == len(problems):
            sys.stderr.write("  fix: run the commands named above and commit what they write\n")
        else:
            sys.stderr.write(
                "  fix: run `envbuild lock` and the commands named above, and commit what they write\n"
            )
        return EXIT_FAILURE
    checked = (
        f"target {args.target}" if args.target else f"{len({t.name for t in current.targets})} target(s)"
    )
    print(f"{path} matches {args.file} and the matrix ({checked})")
    note = mirror_note(current, spec.mirrors)
    if note:
        print(f"note: {note}")
    return EXIT_OK


def build(args: argparse.Namespace) -> int:
    import os

    from envbuild.audit.skip import parse_flags
    from envbuild.engine import select_engine
    from envbuild.pipeline import build_spec, summary_table
    from envbuild.stages.settings import build_settings

    skips, key = parse_flags(args.skip_audit), _lock_key(args)
    spec = _spec(args)
    # flags, then ENVBUILD_*, then envbuild.toml, then the defaults (stages.settings)
    settings = build_settings(
        {
            "out_dir": args.output,
            "engine": args.engine,
            "builder": args.builder,
            "smoke_device": args.smoke_device,
            "gpu_access": args.gpu_access,
            "push": args.push,
            "base_image": args.base_image,
            "wheelhouse": args.wheelhouse,
            "bundle": args.bundle,
            "no_cache": args.no_cache,
            "jobs": args.jobs,
        },
        spec,
        os.environ,
        skip_audit=skips,
        lock_key=key,
        allow_edited_lock=args.allow_edited_lock,
    )
    settings = settings.replace(sign_key=_sign_key(args, push=settings.push))
    select_engine(settings.engine)  # with envbuild.toml's [build] engine in its layers; app restores it
    results = build_spec(
        _load(args, spec),
        spec,
        args.file,
        settings,
        target=args.target,
        every_target=args.all,
        say=_print,
        warn=_warn,
    )
    for _, error in results:
        if error:
            sys.stderr.write(error + "\n")
    if args.all or len(results) > 1:
        sys.stdout.write(summary_table([record for record, _ in results]))
    return EXIT_FAILURE if any(error for _, error in results) else EXIT_OK


def audit(args: argparse.Namespace) -> int:
    import os

    from envbuild.audit.report import to_json, to_text
    from envbuild.audit.skip import merge, parse_flags
    from envbuild.audit.targets import audit_path, is_local
    from envbuild.resolve.query import parse_gpu

    flags = parse_flags(args.skip_audit)
    matrix = _load(args)
    texts = list(args.gpu)
    skips = flags
    if not texts and os.path.exists(args.file):  # the spec's GPUs, and its [audit] skip with them
        spec = _spec(args)
        texts = list(dict.fromkeys(g for t in spec.targets for g in t.stack.gpus))
        skips = merge(spec.audit_skip, flags)
    gpus = tuple(parse_gpu(text, matrix) for text in texts)
    if is_local(args.target):
        result = audit_path(args.target, gpus, args.framework, skips)
    else:
        from envbuild.image.filesystem import audit_image

        result = audit_image(
            args.target, gpus, args.framework, skip=skips, say=lambda line: print(line, file=sys.stderr)
        )
    sys.stdout.write(to_json(result) if args.json else to_text(result))
    return EXIT_OK if result.ok else EXIT_FAILURE


def verify(args: argparse.Namespace) -> int:
    import json

    from envbuild.audit.skip import parse_flags
    from envbuild.image.verify import save_report
    from envbuild.runtime import DEFAULT_RUNTIME, verify
    from envbuild.runtime.fromlog import RUNTIME as LOG_RUNTIME
    from envbuild.runtime.record import save_record, utc_now, verify_record
    from envbuild.smoke.run import summary

    if args.skip_audit and not args.gpu:
        from envbuild.errors import UsageError

        raise UsageError(
            "verify --skip-audit without --gpu: the audit gate runs only for the GPUs --gpu names",
            fix='add --gpu NAME (--gpu H100 --skip-audit LIBRARY="REASON"), or drop --skip-audit',
        )
    skips = parse_flags(args.skip_audit)  # a bad one is a usage error before anything runs
    runtime = args.runtime or (LOG_RUNTIME if args.from_log else DEFAULT_RUNTIME)
    # what the image says it was rendered for: the framework the gate judges, the smoke settings
    labels, unread = _labels_of(args.image, runtime) if args.gpu or not args.from_log else ({}, None)
    if args.gpu:  # the audit gate first: a GPU with no kernel image fails before any container runs
        from envbuild.image.auditgate import audit_gate
        from envbuild.image.auditgate import summary as audit_summary
        from envbuild.image.imagelabels import framework_label
        from envbuild.resolve.query import parse_gpu

        matrix = _load(args)
        gpus = tuple(parse_gpu(text, matrix) for text in args.gpu)
        framework, warning = framework_label(labels, args.image)
        if warning:
            sys.stderr.write(f"verify: warning: {warning}\n")
        gate = audit_gate(  # as `envbuild build` judges it
            args.image,
            gpus,
            framework,
            args.image,
            say=lambda line: print(line, file=sys.stderr),
            skip=skips,
        )
        sys.stderr.write(audit_summary(gate))
        gate.check()
    started = utc_now()
    settings = None
    if args.from_log and (args.smoke_imports or args.smoke_command):
        from envbuild.errors import UsageError

        raise UsageError(
            "--smoke-import and --smoke-command choose the checks of a run, and --from-log judges a run "
            "that already happened",
            fix="drop them: the job ran the image's own [smoke] checks, and its report lists each one",
        )
    if args.from_log:  # the cluster ran it (ci k8s, ci slurm's pyxis jobs): judge its output, run nothing
        from envbuild.runtime.fromlog import verify_from_log

        result = verify_from_log(
            args.image, args.from_log, device=args.smoke_device or "gpu", runtime=runtime
        )
    else:
        settings = _smoke_settings(args, labels, unread)
        result = verify(
            runtime,
            args.image,
            **settings.values(),
            imports=tuple(args.smoke_imports) if args.smoke_imports else None,
            command=args.smoke_command,
            # the Engine's container streams the program's progress lines as they come; it alone takes
            # --gpu-access (the HPC runtimes reach GPUs their own way: --nv, the enroot hook, ch-fromhost)
            **(
                {"say": lambda line: print(line, file=sys.stderr), "gpu_access": _gpu_access(args)}
                if runtime == "docker"
                else {}
            ),
        )
    if args.report:
        save_report(args.report, result)
    if args.record:
        finished = utc_now()
        document = settings.document() if settings is not None else None
        save_record(
            args.record,
            verify_record(result, args.image, started=started, finished=finished, settings=document),
        )
    sys.stdout.write(json.dumps(result.report, indent=2) + "\n" if args.json else summary(result.report))
    return EXIT_OK if result.passed else EXIT_FAILURE


def _gpu_access(args: argparse.Namespace) -> str:
    """--gpu-access, else ENVBUILD_GPU_ACCESS, else auto (the precedence of every build setting)."""
    import os

    from envbuild.stages.settings import layered, rule_named

    return str(layered(rule_named("gpu_access"), args.gpu_access, os.environ, None)[0])


def _labels_of(image: str, runtime: str) -> tuple[dict[str, object], str | None]:
    """(the image's labels, None) or ({}, why they could not be read): untrusted, judged by the caller."""
    from envbuild.errors import EnvbuildError
    from envbuild.image.imagelabels import image_labels

    try:
        return image_labels(image, runtime=runtime), None
    except EnvbuildError as exc:
        return {}, exc.message


def _smoke_settings(args: argparse.Namespace, labels: dict[str, object], unread: str | None):
    """verify's smoke settings (a spec.smokelabels.SmokeChoice): each flag given, else the image's
    io.envbuild.spec.smoke.* label (what render wrote from the spec), else the default. Labels are
    untrusted: one the spec's rules refuse is a warning naming it, and the default. Says on stderr what
    it chose and from where."""
    from envbuild.spec.model import SMOKE_SETTINGS
    from envbuild.spec.smokelabels import DEFAULT, choose

    flags = {
        setting.key: getattr(args, setting.flag[2:].replace("-", "_")) if setting.flag else None
        for setting in SMOKE_SETTINGS
    }
    settings = choose(flags, labels, args.image)
    if unread and any(choice.source == DEFAULT for choice in settings.choices):
        sys.stderr.write(f"verify: warning: {unread}; the settings no flag gives are the defaults\n")
    for warning in settings.warnings:
        sys.stderr.write(f"verify: warning: {warning}\n")
    sys.stderr.write(f"verify: smoke settings: {settings.describe()}\n")
    return settings


def promote(args: argparse.Namespace) -> int:
    from envbuild.errors import UsageError

    images, reports = list(args.image), list(args.report or [])
    if len(images) > 1:  # one verified image per platform: a multi-platform index
        if not args.to or args.tag:
            raise UsageError(
                f"promote got {len(images)} images: several images are promoted as one multi-platform "
                "index, in a registry only",
                fix="pass REPO@sha256:... per platform with --to TAG (and one --report per image)",
            )
        from envbuild.image.promote import promote_index_reported

        promotion = promote_index_reported(images, list(args.to), report_paths=reports)
        for platform, digest in promotion.platforms:
            print(f"{platform}: {digest}")
        print(f"pushed index {promotion.index}")
        for ref, digest in promotion.promoted:
            print(f"promoted {ref}@{digest}")
        return EXIT_OK
    if len(reports) > 1:
        raise UsageError(
            f"promote got {len(reports)} --report files for one image", fix="pass one --report FILE"
        )
    report = reports[0] if reports else None
    if args.to:
        from envbuild.image.promote import promote_in_registry

        for ref, digest in promote_in_registry(images[0], list(args.to), report_path=report):
            print(f"promoted {ref}@{digest}")
        return EXIT_OK
    from envbuild.image.promote import promote_reported

    sign_key = _sign_key(args)
    promotion = promote_reported(images[0], report_path=report, tags=args.tag, push=args.push)
    for tag in promotion.tags:
        print(f"tagged {tag}" + (" (verified on CPU only)" if promotion.device == "cpu" else ""))
    for tag, digest in promotion.pushed:
        print(f"pushed {tag}@{digest}")
    if promotion.pushed:
        from envbuild.attest.publish import publish_promoted

        published = publish_promoted(promotion, report_path=str(report), sign_key=sign_key)
        for item in published.attached:
            print(f"attached the {item['kind']} {item['digest']} to {item['subject']} ({item['path']})")
    return EXIT_OK


def attest(args: argparse.Namespace) -> int:
    if args.attach:
        from envbuild.attest.publish import attach_image

        sign_key = _sign_key(args)
        published = attach_image(  # -f: the spec whose envbuild.lock gives the hashes (with --report)
            args.image,
            record_path=args.record,
            report_path=args.report,
            sign_key=sign_key,
            spec_path=args.file,
        )
        for item in published.attached:
            print(f"attached the {item['kind']} {item['digest']} to {item['subject']} ({item['path']})")
        return EXIT_OK
    from envbuild.errors import UsageError

    for flag in ("record", "report", "sign_key"):
        if getattr(args, flag):
            raise UsageError(
                f"--{flag.replace('_', '-')} is for --attach", fix="add --attach, or drop the flag to check"
            )
    from envbuild.attest.remote import check_image

    judgement = check_image(args.image, key_path=args.key)
    if args.json:
        import json

        sys.stdout.write(json.dumps(judgement.document(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(judgement.text())
    return EXIT_OK if judgement.ok else EXIT_FAILURE


def bake(args: argparse.Namespace) -> int:
    from envbuild.scaleout.bake import bake_command, write_bake_file

    spec = _spec(args)
    write_bake_file(_load(args, spec), spec, args.output, contexts=args.contexts, spec_path=args.file)
    print(f"wrote {args.output}; run: {bake_command(args.output)}")
    return EXIT_OK


def ci_files(args: argparse.Namespace) -> int:
    """`ci github|gitlab|k8s|slurm`: the files written (each marked with this command), or with --check
    compared with what is committed (exit 1 naming each stale file)."""
    import os

    from envbuild.cli.generators import run_generator
    from envbuild.scaleout.generated import shown, stale_report

    run, command = run_generator(args)
    base = os.path.abspath(args.output)  # each file as the user's -o names it

    def as_typed(path: str) -> str:
        return args.output if path == base else os.path.join(args.output, os.path.relpath(path, base))

    here = [as_typed(item.path) if item.path.startswith(base) else shown(item.path) for item in run.recorded]
    if not args.check:
        print(f"wrote {', '.join(here)}")
        if args.command_path == "ci slurm":
            print(f"run: {os.path.join(args.output, 'submit.sh')} TARGET=REPO@sha256:...")
        return EXIT_OK
    stale = run.stale()
    if not stale:
        print(f"up to date: {', '.join(here)}")
        return EXIT_OK
    sys.stdout.write(stale_report(stale) + "\n")
    sys.stdout.write(f"  fix: run `{command}` and commit what it writes\n")
    return EXIT_FAILURE


def doctor(args: argparse.Namespace) -> int:
    from envbuild.host.doctor import run_doctor, to_json, to_text

    checks = run_doctor(
        _load(args),
        lock=args.lock,
        image=args.image,
        timeout=args.timeout,
        gpu=args.gpu,
        registries=tuple(args.registry),
        runtime=args.runtime,
        bundle=args.bundle,
        spec=args.file,
    )
    sys.stdout.write(to_json(checks) + "\n" if args.json else to_text(checks))
    return EXIT_FAILURE if any(c.status == "fail" for c in checks) else EXIT_OK


def smoke(args: argparse.Namespace) -> int:
    import json

    from envbuild.smoke.run import run_smoke, summary

    report, _ = run_smoke(
        args.framework,
        device=args.device,
        steps=args.steps,
        precision=args.precision,
        timeout=args.timeout,
        imports=tuple(args.smoke_imports or ()),
        command=args.smoke_command,
    )
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else summary(report))
    return EXIT_OK if report["passed"] else EXIT_FAILURE


def init(args: argparse.Namespace) -> int:
    from envbuild.host.hoststack import host_stack
    from envbuild.matrix.lifecycle import today
    from envbuild.spec.starter import starter_text, write_starter

    chosen = host_stack(_load(args), driver=args.driver, gpus=args.gpu, day=today())
    written = write_starter(args.file, starter_text(chosen.driver, chosen.gpus), force=args.force)
    for note in chosen.notes:
        print(note)
    print(f"wrote {written}; next: envbuild resolve -f {args.file}, then envbuild render -f {args.file}")
    return EXIT_OK


def completion(args: argparse.Namespace) -> int:
    import shtab  # only here: no other command pays for it

    from envbuild.cli.parser import build_parser

    parser, _ = build_parser(every=True)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return EXIT_OK


def matrix_check(args: argparse.Namespace) -> int:
    from envbuild.errors import MatrixError
    from envbuild.matrix.check import check_matrix, summary

    try:
        matrix = _load(args)
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


def matrix_gpus(args: argparse.Namespace) -> int:
    import json

    from envbuild.matrix.gpulist import gpu_document, parse_cc_filter, select_gpus

    cc = parse_cc_filter(args.cc) if args.cc is not None else None  # bad input before the matrix loads
    gpus = select_gpus(_load(args), cc=cc, word=args.word)
    if args.json:
        sys.stdout.write(json.dumps({"gpus": [gpu_document(g) for g in gpus]}, indent=2) + "\n")
    for gpu in gpus if not args.json else ():
        aliases = f"  (also: {', '.join(gpu.aliases)})" if gpu.aliases else ""
        print(f"{f'{gpu.cc[0]}.{gpu.cc[1]}':<6}{gpu.name}{aliases}")
    if not gpus:
        asked = " and ".join(
            f for f in (f"--cc {args.cc}" if args.cc else "", repr(args.word) if args.word else "") if f
        )
        sys.stderr.write(
            f"no GPU in the matrix matches {asked}; `envbuild matrix gpus` lists them all, and a GPU "
            "the matrix lacks can be given to --gpu as its compute capability\n"
        )
        return EXIT_FAILURE
    return EXIT_OK


def matrix_refresh(args: argparse.Namespace) -> int:
    from envbuild.matrix.lifecycle import today
    from envbuild.refresh.run import refresh_matrix, settings_from, to_json, to_text

    settings = settings_from(
        args.source,
        args.pypi_url,
        args.pytorch_index_url,
        args.cuda_repository,
        timeout=args.timeout,
        audit=args.audit,
        requirements=args.requirements,
    )
    day = today().isoformat()
    findings, written = refresh_matrix(args.matrix, settings, day, write=args.write)
    view = to_json if args.json else to_text
    sources = settings.sources + (("requirements",) if settings.requirements else ())
    sys.stdout.write(view(findings, day=day, sources=sources, written=written))
    return EXIT_OK


HANDLERS = {
    "resolve": resolve,
    "render": render,
    "init": init,
    "lock": lock,
    "vendor": vendor,
    "audit": audit,
    "build": build,
    "verify": verify,
    "promote": promote,
    "attest": attest,
    "bake": bake,
    "ci github": ci_files,
    "ci gitlab": ci_files,
    "ci k8s": ci_files,
    "ci slurm": ci_files,
    "doctor": doctor,
    "smoke": smoke,
    "matrix check": matrix_check,
    "matrix gpus": matrix_gpus,
    "matrix refresh": matrix_refresh,
    "completion": completion,
}
