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
import os

from envbuild import __version__
from envbuild._util.files import file_sha256
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.attest import inputs as attest_inputs
from envbuild.attest.record import BuildRecord
from envbuild.engine import current_engine
from envbuild.errors import EnvbuildError, UsageError
from envbuild.image.promote import promote
from envbuild.lockfile.model import lock_path
from envbuild.matrix.platforms import short
from envbuild.oci.reference import split_tag
from envbuild.plan.builds import builds, by_target
from envbuild.plan.lockmatch import lock_for_render
from envbuild.render.context import check_destination, write_context
from envbuild.render.wheelgap import require_wheels
from envbuild.stages import attest as attest_stage
from envbuild.stages import audit as audit_stage
from envbuild.stages import build as build_stage
from envbuild.stages import promote as promote_stage
from envbuild.stages import render as render_stage
from envbuild.stages import verify as verify_stage
from envbuild.stages.settings import BuildSettings
from envbuild.stages.target import RECORD, RecordFile, TargetRun

if TYPE_CHECKING:
    from collections.abc import Callable

    from envbuild.image.promote import Promotion
    from envbuild.lockfile.model import LockedTarget
    from envbuild.matrix.model import Matrix
    from envbuild.plan.builds import TargetBuild
    from envbuild.plan.plan import Plan
    from envbuild.spec.model import Spec, Target


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


def build_spec(
    matrix: Matrix,
    spec: Spec,
    spec_file: str,
    settings: BuildSettings,
    *,
    target: str | None = None,
    every_target: bool = False,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None],
) -> list[tuple[dict, str | None]]:
    """`envbuild build`: the chosen targets through render -> build -> verify -> promote, `jobs` at a
    time; (record, error message or None) per target, in the spec's order."""
    if target is None and not every_target and len(spec.targets) > 1:
        names = ", ".join(t.name for t in spec.targets)
        raise UsageError(
            f"{spec_file} has {len(spec.targets)} targets", fix=f"pass --all or --target ({names})"
        )
    lock = lock_for_render(
        spec, matrix.digest, key=settings.lock_key, allow_edited=settings.allow_edited_lock, warn=warn
    )
    digest = lock_file_digest(lock_path(spec_file)) if lock else None
    parallel = settings.jobs > 1

    def build_one(chosen: Target) -> BuildRecord:
        tell = (lambda line: say(f"[{chosen.name}] {line}")) if parallel else say
        group = planned[chosen.name]
        if len(group) > 1:
            return build_platforms(
                matrix,
                spec,
                chosen,
                settings,
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
            settings,
            lock=only.locked,
            lock_digest=digest,
            say=tell,
            progress=tell if parallel else None,
            platform=only.platform,
        )

    chosen_targets = spec.target(target)
    for chosen in chosen_targets:  # a usage error for all before any target starts
        check_destination(settings.out_dir, chosen.name)
    # target -> its builds: the spec's platforms, each with its own lock entry, as render has them (a
    # lock error for all before any target starts)
    planned = by_target(builds(matrix, spec, lock, only=target))
    if settings.bundle is not None:  # every file the lock needs, hash-checked, before any build
        from envbuild.render.bundle import require_covers

        names = [chosen.name for chosen in chosen_targets]
        bundle = require_covers(settings.bundle, lock, names, installer=spec.image.installer)
        settings = settings.replace(wheelhouse=bundle.wheelhouse)  # its wheels/: the --wheelhouse path
    if lock is not None and settings.wheelhouse is not None:  # a lock that outgrew it: before any build
        names = {chosen.name for chosen in chosen_targets}
        require_wheels(settings.wheelhouse, [entry for entry in lock.targets if entry.name in names])
    results = build_all(chosen_targets, build_one, jobs=settings.jobs)
    # a target that failed before its record existed says which device it would have been verified on
    return [
        (record if record.has("smoke_device") else record.with_(smoke_device=settings.smoke_device), error)
        for record, error in results
    ]


def build_target(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    settings: BuildSettings,
    *,
    lock: LockedTarget | None = None,
    lock_digest: str | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
    platform: str | None = None,
    promote_image: bool = True,
    context: str | None = None,
) -> BuildRecord:
    """Run the four stages for one target; returns its record (its `ok` says if it passed).

    platform: the one to build (None: the lock's, else the target's first). promote_image=False stops
    after a passing smoke step, with the image untagged (status "verified"): a target of several
    platforms is promoted only once every platform's image has passed (build_platforms). context: the
    context's directory name in out_dir (default the target's)."""
    build = TargetRun(
        matrix=matrix,
        spec=spec,
        target=target,
        settings=settings,
        lock=lock,
        platform=platform,
        out_dir=settings.out_dir,
        context=context or target.name,
        say=say,
        progress=progress,
    )
    record = RecordFile(build.record_path, new_record(target.name, lock_digest, build.smoke_device))
    plan: Plan | None = None

    def verified_tags() -> list[str]:
        """The tags to take back when the build stops after its smoke step passed (promote may have
        made some of them): none before the plan exists or before verify passed."""
        passed = (record.current.stages or {}).get("verify", {}).get("passed")
        return list(plan.tags) if plan is not None and passed else []

    check_destination(build.out_dir, build.context)  # before anything, record.json included, is written
    with TargetLock(build.out_dir, build.context, say):
        try:
            plan, backend = render_stage.run(build, record)
            image_id = build_stage.run(build, record, plan, backend).image_id
            gate = audit_stage.run(build, record, plan, image_id)
            verification = verify_stage.run(build, record, plan, image_id)
            if not promote_image:  # build_platforms promotes once every platform has passed
                record.update(ok=True, status="verified", labels=gate.labels, plan_tags=list(plan.tags))
                record.update(finished=attest_inputs.now())
                record.write()
                return record.current
            promotion = promote_stage.run(build, record, plan, image_id, verification, gate)
            # the record is final from here on but for the attest stage's own entry, so the
            # provenance built from it is the one record.json reproduces
            record.update(ok=True, status="promoted", finished=attest_inputs.now())
            attest_stage.run(record, promotion.image_id, build.context_dir, settings, say=say)
            record.write()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP: "interrupted by SIGTERM"
            _untag(verified_tags())
            record.update(status="interrupted", error=str(exc) or "interrupted", tags=[])
            record.update(finished=attest_inputs.now())
            record.write()
            raise
        except EnvbuildError as exc:
            record.update(status="failed", error=exc.message)
            taken_back = verified_tags()
            if taken_back:  # a registry error after tagging: no tag may stay behind
                _untag(taken_back)
                record.update(tags=[])
            record.update(finished=attest_inputs.now())
            record.write()
            raise
        record.update(finished=record.current.finished or attest_inputs.now())
        record.write()
    return record.current


def new_record(target: str, lock_digest: str | None, smoke_device: str) -> BuildRecord:
    """A target's record.json as it starts: every field the stages fill, empty (attest.record)."""
    return BuildRecord.new(
        target=target,
        envbuild=__version__,
        ok=False,
        status="started",
        stages={},
        images={},
        tags=[],
        pushed=[],
        smoke=None,
        error=None,
        lock_digest=lock_digest,
        smoke_device=smoke_device,
        started=attest_inputs.now(),
        finished=None,
    )


def build_platforms(
    matrix: Matrix,
    spec: Spec,
    target: Target,
    settings: BuildSettings,
    group: tuple[TargetBuild, ...],
    *,
    lock_digest: str | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
) -> BuildRecord:
    """A target of several platforms: each platform's image rendered, built, audited and verified in
    turn (its context in <out>/<target>/<arch>/, where render writes it), and nothing tagged or pushed
    unless all passed.

    The first platform that fails raises, as build_target does: the images already verified stay
    untagged. Emulated platforms (arm64 on an x86_64 runner) run the CPU smoke step under QEMU."""
    records: dict[str, BuildRecord] = {}
    # <out>/<target>/ as a context of envbuild's own (its marker, nothing else), as render writes it for
    # several platforms: it replaces the last build's contexts, and a later build may replace it again
    write_context({}, settings.out_dir, target.name)
    for build in group:
        say(f"{target.name}: platform {build.platform}")
        records[build.platform] = build_target(
            matrix,
            spec,
            target,
            settings.replace(out_dir=os.path.join(settings.out_dir, target.name)),
            lock=build.locked,  # this platform's own entry (plan.builds): never another platform's
            lock_digest=lock_digest,
            say=say,
            progress=progress,
            platform=build.platform,
            promote_image=False,
            context=build.arch,
        )
    return promote_every_platform(target, records, settings, say=say)


def promote_every_platform(
    target: Target,
    records: dict[str, BuildRecord],
    settings: BuildSettings,
    *,
    say: Callable[[str], None] = print,
) -> BuildRecord:
    """Every platform's image passed its smoke step: promote each, then join them in one index.

    Each platform's verified image is labelled, tagged `<tag>-<arch>` and (with --push) pushed, as a
    single-platform build promotes its image; the index over the pushed digests then gets the spec's
    own tags, by digest, through envbuild.image.promote.promote_platforms (which checks each image's
    platform and verified label again in the registry). An index lives in a registry: without --push
    the per-platform tags are the result, and the build says so. Returns the target's record, with
    each platform's under "platforms"."""
    from envbuild.image.promote import PlatformImage, promote_platforms

    first = next(iter(records.values()))
    tags = list(first.plan_tags or ())
    summary = RecordFile(
        os.path.join(settings.out_dir, target.name, RECORD),
        BuildRecord.new(
            target=target.name,
            envbuild=__version__,
            ok=False,
            status="promoting",
            stack=first.stack,
            smoke_device=first.smoke_device,
            platforms={},
            tags=[],
            pushed=[],
            index=None,
            error=None,
        ),
    )
    images: list[PlatformImage] = []
    made: list[str] = []
    try:
        for name, record in records.items():
            promotion = _promote_one(target, name, record, tags, settings, say=say, made=made)
            summary.update(
                platforms={
                    **(summary.current.platforms or {}),
                    name: {"image": promotion.image_id, "tags": list(promotion.tags)},
                }
            )
            if promotion.pushed:
                repository = split_tag(promotion.pushed[0][0])[0]
                images.append(
                    PlatformImage(ref=f"{repository}@{promotion.pushed[0][1]}", platform=name, report=None)
                )
        summary.update(tags=list(made))
        if not settings.push:
            summary.update(ok=True, status="promoted")
            summary.write()
            return summary.current
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
        summary.write()
        raise
    summary.write()
    return summary.current


def _promote_one(
    target: Target,
    name: str,
    verified: BuildRecord,
    tags: list[str],
    settings: BuildSettings,
    *,
    say: Callable[[str], None],
    made: list[str],
) -> Promotion:
    """One platform's verified image tagged `<tag>-<arch>` (and pushed), attested, and its record
    written in <out>/<target>/<arch>/; each tag it made is added to `made` at once, so a later
    failure can take it back."""
    arch = short(name)
    built = verified.images.built if verified.images else None
    promotion = promote(
        str(built),
        tags=[f"{tag}-{arch}" for tag in tags],
        report=verified.smoke,
        device=verified.smoke_device,
        push=settings.push,
        labels=verified.labels,
        say=lambda line: say(f"{target.name}: {line}"),
    )
    made += promotion.tags
    arch_dir = os.path.join(settings.out_dir, target.name, arch)
    record = RecordFile(os.path.join(arch_dir, RECORD), verified)
    record.update(
        images={"built": built, "promoted": promotion.image_id},
        ok=True,
        status="promoted",
        tags=list(promotion.tags),
        pushed=[{"tag": tag, "digest": digest} for tag, digest in promotion.pushed],
        finished=attest_inputs.now(),
    )
    attest_stage.run(record, promotion.image_id, arch_dir, settings, say=say)
    record.write()
    return promotion


def _untag(tags) -> None:
    if tags:
        current_engine().remove_tags(list(tags))  # best effort: the record already says the promotion failed


def lock_file_digest(path: str) -> str | None:
    return file_sha256(path) if os.path.exists(path) else None


def build_all(targets, build_one, *, jobs: int) -> list[tuple[BuildRecord, str | None]]:
    """Build targets, `jobs` at a time against one engine; results in the targets' order.

    A failing target does not stop the others: each result is (record, error message or None).
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(target) -> tuple[BuildRecord, str | None]:
        try:
            return build_one(target), None
        except EnvbuildError as exc:
            return BuildRecord.new(target=target.name, status="failed"), redact(exc.render())

    if jobs <= 1:
        return [one(t) for t in targets]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, targets))


def summary_table(records: list[BuildRecord]) -> str:
    rows = [("target", "result", "framework", "CUDA", "smoke", "tags")]
    for record in records:
        stack = record.stack or {}
        rows.append(
            (
                str(record.target),
                record.status if record.has("status") else "?",
                f"{stack.get('framework', '-')} {stack.get('framework_version', '')}".strip(),
                str(stack.get("cuda", "-")),
                record.smoke_device if record.has("smoke_device") else "-",
                ", ".join(record.tags or ()) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return (
        "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows) + "\n"
    )
