"""`envbuild build`: render -> build -> verify -> promote, per target, with a record for CI.

An image gets a tag only after its audit and smoke step passed: the build is untagged, the audit gate
reads its GPU kernels for the target's GPUs (image.auditgate), verify runs the smoke program in a
throwaway container, and promote adds a label-only layer and the tags (and pushes).
Every stage's outcome goes into build/<target>/record.json, written after each stage, so a failure,
an interrupt or a registry error leaves a record of what happened and no tag. Every string of the
record is redacted as it is written: its error and smoke fields carry Engine and registry text.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

from envbuild import __version__
from envbuild._util.files import file_sha256, write_atomic
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact, redact_values
from envbuild.attest import inputs as attest_inputs
from envbuild.audit.skip import merge as merge_skips
from envbuild.engine import current_engine
from envbuild.errors import EnvbuildError, UsageError
from envbuild.image import engine
from envbuild.image.auditgate import audit_gate, summary
from envbuild.image.platforms import require_buildable
from envbuild.image.promote import promote
from envbuild.image.verify import report_digest, report_document, verify_image
from envbuild.lockfile.model import lock_path
from envbuild.matrix.platforms import short
from envbuild.oci.reference import split_tag
from envbuild.plan.builds import builds, by_target
from envbuild.plan.lockmatch import lock_for_render, require_match
from envbuild.plan.plan import build_plan
from envbuild.render.context import check_destination, render_files, write_context
from envbuild.render.wheelgap import require_wheels
from envbuild.resolve.query import parse_gpu

if TYPE_CHECKING:
    from collections.abc import Callable

    from envbuild.audit.skip import AuditSkip
    from envbuild.lockfile.model import LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.plan.builds import TargetBuild
    from envbuild.plan.plan import Plan
    from envbuild.spec.model import Spec, Target

RECORD = "record.json"


def _write_json(path: str, data: dict) -> None:
    write_atomic(path, json.dumps(redact_values(data), indent=2, sort_keys=True) + "\n")


class TargetLock:
    """One `envbuild build` per target at a time: a second one waits for the first (flock)."""

    def __init__(self, directory: str, target: str, say) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f".{target}.build.lock")  # beside the context: render replaces it
        self.say = say
        self.handle = None

    def __enter__(self) -> TargetLock:
        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.say(f"another envbuild build holds {self.path}; waiting for it")
            fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self.handle:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def engine_version() -> str | None:
    return current_engine().version()


class BuildOptions(Record):
    """How `envbuild build` runs, merged from the command line and the spec's [smoke] table."""

    __slots__ = (
        "out_dir",
        "builder",
        "smoke_device",
        "push",
        "base_image",
        "wheelhouse",
        "no_cache",
        "jobs",
        "lock_key",
        "allow_edited_lock",
        "sign_key",
        "skip_audit",
    )
    out_dir: str
    builder: str  # auto | api | buildkit
    smoke_device: str | None  # None: the spec's [smoke] device
    push: bool
    base_image: str | None
    wheelhouse: str | None
    no_cache: bool
    jobs: int
    lock_key: bytes | None  # the HMAC key a sealed lock is checked with (lockfile.seal)
    allow_edited_lock: bool  # build from a lock whose seal fails, with a warning: emergencies only
    sign_key: str | None  # a PEM key: the attached SBOM and provenance are DSSE envelopes it signed
    skip_audit: tuple[AuditSkip, ...]  # --skip-audit: added to the spec's [audit] skip (a flag wins)

    def __init__(self, *, skip_audit: tuple[AuditSkip, ...] = (), **values: object) -> None:
        super().__init__(skip_audit=skip_audit, **values)


def build_spec(
    matrix: Matrix,
    spec: Spec,
    spec_file: str,
    options: BuildOptions,
    *,
    target: str | None = None,
    every_target: bool = False,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None],
) -> list[tuple[dict, str | None]]:
    """`envbuild build`: the chosen targets through render -> build -> verify -> promote, `jobs` at a
    time; (record, error message or None) per target, in the spec's order."""
    if options.jobs < 1:
        raise UsageError(f"-j {options.jobs} must be 1 or more", fix="e.g. -j 2")
    if target is None and not every_target and len(spec.targets) > 1:
        names = ", ".join(t.name for t in spec.targets)
        raise UsageError(
            f"{spec_file} has {len(spec.targets)} targets", fix=f"pass --all or --target ({names})"
        )
    lock = lock_for_render(
        spec, matrix.digest, key=options.lock_key, allow_edited=options.allow_edited_lock, warn=warn
    )
    digest = lock_file_digest(lock_path(spec_file)) if lock else None
    device = options.smoke_device or spec.smoke.device
    parallel = options.jobs > 1

    def build_one(chosen: Target) -> dict:
        tell = (lambda line: say(f"[{chosen.name}] {line}")) if parallel else say
        group = planned[chosen.name]
        if len(group) > 1:
            return build_platforms(
                matrix,
                spec,
                chosen,
                options.replace(smoke_device=device),
                group,
                lock_digest=digest,
                say=tell,
                progress=tell if parallel else None,
            )
        (only,) = group
        return build_target(
            matrix,
            spec,
            chosen,
            options.replace(smoke_device=device),
            lock=only.locked,
            lock_digest=digest,
            say=tell,
            progress=tell if parallel else None,
            platform=only.platform,
        )

    chosen_targets = spec.target(target)
    for chosen in chosen_targets:  # a usage error for all before any target starts
        check_destination(options.out_dir, chosen.name)
    # target -> its builds: the spec's platforms, each with its own lock entry, as render has them (a
    # lock error for all before any target starts)
    planned = by_target(builds(matrix, spec, lock, only=target))
    if lock is not None and options.wheelhouse is not None:  # a lock that outgrew it: before any build
        names = {chosen.name for chosen in chosen_targets}
        require_wheels(options.wheelhouse, [entry for entry in lock.targets if entry.name in names])
    results = build_all(chosen_targets, build_one, jobs=options.jobs)
    for record, _ in results:
        record.setdefault("smoke_device", device)
    return results


def build_target(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    options: BuildOptions,
    *,
    lock: LockedTarget | None = None,
    lock_digest: str | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
    platform: str | None = None,
    promote_image: bool = True,
    context: str | None = None,
) -> dict:
    """Run the four stages for one target; returns its record (record["ok"] says if it passed).

    platform: the one to build (None: the lock's, else the target's first). promote_image=False stops
    after a passing smoke step, with the image untagged (status "verified"): a target of several
    platforms is promoted only once every platform's image has passed (build_platforms). context: the
    context's directory name in out_dir (default the target's)."""
    out_dir, smoke_device = options.out_dir, str(options.smoke_device or spec.smoke.device)
    context = context or target.name
    context_dir = os.path.join(out_dir, context)
    record: dict = {
        "target": target.name,
        "envbuild": __version__,
        "ok": False,
        "status": "started",
        "stages": {},
        "images": {},
        "tags": [],
        "pushed": [],
        "smoke": None,
        "error": None,
        "lock_digest": lock_digest,
        "smoke_device": smoke_device,
        "started": attest_inputs.now(),
        "finished": None,
    }
    record_path = os.path.join(context_dir, RECORD)

    def stage(name: str, started: float, **extra) -> None:
        record["stages"][name] = {"seconds": round(time.perf_counter() - started, 3), **extra}
        _write_json(record_path, record)

    def verified_tags() -> list[str]:
        """The tags to take back when the build stops after its smoke step passed (promote may have
        made some of them): none before the plan exists or before verify passed."""
        passed = record["stages"].get("verify", {}).get("passed")
        return list(plan.tags) if plan is not None and passed else []

    plan: Plan | None = None
    check_destination(out_dir, context)  # before anything, record.json included, is written there
    with TargetLock(out_dir, context, say):
        try:
            started = time.perf_counter()
            backend = engine.choose_backend(options.builder)
            plan = build_plan(
                matrix,
                spec,
                target,
                base_image=options.base_image,
                wheelhouse=options.wheelhouse is not None,
                lock=lock,
                buildkit=backend == "buildkit",
                platform=platform,
            )
            if lock is not None:
                require_match(lock, plan, lock_path(spec.path))
            write_context(render_files(plan), out_dir, context, wheelhouse=options.wheelhouse, plan=plan)
            record.update(
                stack=plan.stack_document, engine=engine_version(), backend=backend, platform=plan.platform
            )
            record.update(attest_inputs.record_inputs(spec, plan, lock, context_dir))
            stage("render", started, context=context_dir)
            require_buildable(plan.platform, smoke_device)  # before a long emulated build that cannot pass
            say(
                f"{target.name}: rendered {plan.stack_document['framework']} "
                f"{plan.stack_document['framework_version']} ({plan.strategy}, {backend}) in {context_dir}"
            )

            started = time.perf_counter()
            result = engine.build_image(
                context_dir,
                backend=backend,
                no_cache=options.no_cache,
                log_path=os.path.join(context_dir, "build.log"),
                progress=progress or engine.Progress(),
                platform=plan.platform,  # asked of the builder, and checked on the image it made
            )
            record["images"]["built"] = result.image_id
            stage("build", started, steps=result.steps)
            say(f"{target.name}: built {result.image_id[:19]} in {result.seconds:.1f}s (untagged)")

            started = time.perf_counter()  # the audit gate: no kernel image for a GPU fails before smoke
            record["status"] = "auditing"
            gpus = tuple(parse_gpu(text, matrix) for text in target.stack.gpus)
            # the wheels the build installed give a duplicated CUDA library's wheel copy its version
            wheels = {str(d["name"]): str(d["version"]) for d in record.get("dependencies") or ()}
            gate = audit_gate(
                result.image_id,
                gpus,
                plan.stack_document["framework"],
                target.name,
                skip=merge_skips(spec.audit_skip, options.skip_audit),
                say=lambda line: say(f"{target.name}: {line}"),
                wheels=wheels,
            )
            record["audit"] = gate.document
            stage("audit", started, ok=gate.error is None)
            for line in summary(gate).splitlines():
                say(f"{target.name}: {line}")
            gate.check()

            started = time.perf_counter()
            record["status"] = "verifying"
            verification = verify_image(
                result.image_id,
                device=smoke_device,
                steps=spec.smoke.steps,
                precision=spec.smoke.precision,
                timeout=spec.smoke.timeout,
                # the image carries these (smoke_checks.json); asked for too, so the report must show each
                imports=spec.smoke.imports or None,
                command=spec.smoke.command,
                say=lambda line: say(f"{target.name}: {line}"),
            )
            record["smoke"] = verification.report
            record["report_digest"] = report_digest(
                report_document(verification.image_id, smoke_device, verification.report)
            )  # what `verify --report` would write, and the promoted image's label carries
            stage("verify", started, passed=verification.passed, device=smoke_device)
            if not verification.passed:
                failed = "; ".join(
                    f"{f['gate']}: {f['detail']} (hint: {f['hint']})"
                    for f in verification.report.get("failed", [])
                )
                raise EnvbuildError(
                    f"{target.name}: the smoke step failed on {smoke_device}: {failed}",
                    fix="the image was not tagged; fix the cause and build again",
                )
            say(
                f"{target.name}: smoke step passed on {smoke_device} "
                f"({verification.report.get('throughput_samples_per_s')} samples/s"
                + (f", {plan.platform} emulated" if verification.emulated else "")
                + ")"
            )
            if not promote_image:  # build_platforms promotes once every platform has passed
                record.update(ok=True, status="verified", labels=gate.labels, plan_tags=list(plan.tags))
                record["finished"] = attest_inputs.now()
                _write_json(record_path, record)
                return record

            started = time.perf_counter()
            record["status"] = "promoting"
            promotion = promote(
                result.image_id,
                tags=list(plan.tags),
                report=verification.report,
                device=smoke_device,
                push=options.push,
                labels=gate.labels,
                say=lambda line: say(f"{target.name}: {line}"),
            )
            record["images"]["promoted"] = promotion.image_id
            record["tags"] = list(promotion.tags)
            record["pushed"] = [{"tag": tag, "digest": digest} for tag, digest in promotion.pushed]
            stage("promote", started, pushed=options.push)
            for tag in promotion.tags:
                say(
                    f"{target.name}: tagged {tag}"
                    + (" (verified on CPU only)" if smoke_device == "cpu" else "")
                )
            for tag, digest in promotion.pushed:
                say(f"{target.name}: pushed {tag}@{digest}")
            # the record is final from here on but for the attest stage's own entry, so the
            # provenance built from it is the one record.json reproduces
            record.update(ok=True, status="promoted", finished=attest_inputs.now())
            attest(record, promotion.image_id, context_dir, options, say=say)
            _write_json(record_path, record)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP: "interrupted by SIGTERM"
            _untag(verified_tags())
            record.update(status="interrupted", error=str(exc) or "interrupted", tags=[])
            record["finished"] = attest_inputs.now()
            _write_json(record_path, record)
            raise
        except EnvbuildError as exc:
            record.update(status="failed", error=exc.message)
            if verified_tags():  # a registry error after tagging: no tag may stay behind
                _untag(verified_tags())
                record["tags"] = []
            record["finished"] = attest_inputs.now()
            _write_json(record_path, record)
            raise
        record["finished"] = record.get("finished") or attest_inputs.now()
        _write_json(record_path, record)
    return record


def attest(record: dict, image_id: str, directory: str, options: BuildOptions, *, say) -> None:
    """The attest stage: the SBOM and provenance of the promoted image written next to record.json
    and, with --push, attached to every pushed digest (attest.publish). Its outcome goes under
    record["attestations"] (fields.RECORD_AFTER_ATTACH), which the documents never cover."""
    from envbuild.attest.publish import publish

    started = time.perf_counter()
    published = publish(record, image_id, directory=directory, sign_key=options.sign_key)
    record["attestations"] = {
        "files": [os.path.basename(path) for path in published.files],
        "attached": list(published.attached),
        "seconds": round(time.perf_counter() - started, 3),
    }
    for item in published.attached:
        say(
            f"{record['target']}: attached the {item['kind']} {item['digest'][:19]} to {item['subject']} "
            f"({item['path']}{', signed' if options.sign_key else ''})"
        )


def build_platforms(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    options: BuildOptions,
    group: tuple[TargetBuild, ...],
    *,
    lock_digest: str | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """A target of several platforms: each platform's image rendered, built, audited and verified in
    turn (its context in <out>/<target>/<arch>/, where render writes it), and nothing tagged or pushed
    unless all passed.

    The first platform that fails raises, as build_target does: the images already verified stay
    untagged. Emulated platforms (arm64 on an x86_64 runner) run the CPU smoke step under QEMU."""
    records: dict[str, dict] = {}
    # <out>/<target>/ as a context of envbuild's own (its marker, nothing else), as render writes it for
    # several platforms: it replaces the last build's contexts, and a later build may replace it again
    write_context({}, options.out_dir, target.name)
    for build in group:
        say(f"{target.name}: platform {build.platform}")
        records[build.platform] = build_target(
            matrix,
            spec,
            target,
            options.replace(out_dir=os.path.join(options.out_dir, target.name)),
            lock=build.locked,  # this platform's own entry (plan.builds): never another platform's
            lock_digest=lock_digest,
            say=say,
            progress=progress,
            platform=build.platform,
            promote_image=False,
            context=build.arch,
        )
    return promote_every_platform(target, records, options, say=say)


def promote_every_platform(
    target: Target, records: dict[str, dict], options: BuildOptions, *, say: Callable[[str], None] = print
) -> dict:
    """Every platform's image passed its smoke step: promote each, then join them in one index.

    Each platform's verified image is labelled, tagged `<tag>-<arch>` and (with --push) pushed, as a
    single-platform build promotes its image; the index over the pushed digests then gets the spec's
    own tags, by digest, through envbuild.image.promote.promote_platforms (which checks each image's
    platform and verified label again in the registry). An index lives in a registry: without --push
    the per-platform tags are the result, and the build says so. Returns the target's record, with
    each platform's under "platforms"."""
    from envbuild.image.promote import PlatformImage, promote_platforms

    first = next(iter(records.values()))
    tags = list(first["plan_tags"])
    summary: dict = {
        "target": target.name,
        "envbuild": __version__,
        "ok": False,
        "status": "promoting",
        "stack": first.get("stack"),
        "smoke_device": first.get("smoke_device"),
        "platforms": {},
        "tags": [],
        "pushed": [],
        "index": None,
        "error": None,
    }
    record_path = os.path.join(options.out_dir, target.name, RECORD)
    images: list[PlatformImage] = []
    made: list[str] = []
    try:
        for name, record in records.items():
            arch = short(name)
            promotion = promote(
                record["images"]["built"],
                tags=[f"{tag}-{arch}" for tag in tags],
                report=record["smoke"],
                device=record["smoke_device"],
                push=options.push,
                labels=record["labels"],
                say=lambda line: say(f"{target.name}: {line}"),
            )
            made += promotion.tags
            record["images"]["promoted"] = promotion.image_id
            record.update(
                ok=True,
                status="promoted",
                tags=list(promotion.tags),
                pushed=[{"tag": tag, "digest": digest} for tag, digest in promotion.pushed],
                finished=attest_inputs.now(),
            )
            arch_dir = os.path.join(options.out_dir, target.name, arch)
            attest(record, promotion.image_id, arch_dir, options, say=say)
            _write_json(os.path.join(arch_dir, RECORD), record)
            summary["platforms"][name] = {"image": promotion.image_id, "tags": list(promotion.tags)}
            if promotion.pushed:
                repository = split_tag(promotion.pushed[0][0])[0]
                images.append(
                    PlatformImage(ref=f"{repository}@{promotion.pushed[0][1]}", platform=name, report=None)
                )
        summary["tags"] = list(made)
        if not options.push:
            summary.update(ok=True, status="promoted")
            _write_json(record_path, summary)
            return summary
        index = promote_platforms(images, to=[split_tag(tag)[1] for tag in tags])
        summary.update(
            ok=True,
            status="promoted",
            index=index.index,
            tags=[*made, *(ref for ref, _ in index.promoted)],
            pushed=[{"tag": ref, "digest": digest} for ref, digest in index.promoted],
        )
    except EnvbuildError as exc:
        _untag(made)  # no platform keeps a tag when the target as a whole did not promote
        summary.update(status="failed", error=exc.message, tags=[])
        _write_json(record_path, summary)
        raise
    _write_json(record_path, summary)
    return summary


def _untag(tags) -> None:
    if tags:
        current_engine().remove_tags(list(tags))  # best effort: the record already says the promotion failed


def lock_file_digest(path: str) -> str | None:
    return file_sha256(path) if os.path.exists(path) else None


def build_all(targets, build_one, *, jobs: int) -> list[tuple[dict, str | None]]:
    """Build targets, `jobs` at a time against one engine; results in the targets' order.

    A failing target does not stop the others: each result is (record, error message or None).
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(target) -> tuple[dict, str | None]:
        try:
            return build_one(target), None
        except EnvbuildError as exc:
            return {"target": target.name, "status": "failed"}, redact(exc.render())

    if jobs <= 1:
        return [one(t) for t in targets]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, targets))


def summary_table(records: list[dict]) -> str:
    rows = [("target", "result", "framework", "CUDA", "smoke", "tags")]
    for record in records:
        stack = record.get("stack") or {}
        rows.append(
            (
                record["target"],
                record.get("status", "?"),
                f"{stack.get('framework', '-')} {stack.get('framework_version', '')}".strip(),
                str(stack.get("cuda", "-")),
                record.get("smoke_device", "-"),
                ", ".join(record.get("tags", [])) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return (
        "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows) + "\n"
    )
