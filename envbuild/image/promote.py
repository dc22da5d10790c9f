"""`promote`: label a verified image, tag it, and optionally push the tags.

Only an image whose smoke report passed is promoted: a report file only through
image.trust.trusted_report, and every report re-judged by the smoke step's gates. The promoted image
is a metadata-only image on top of the verified one (a `FROM <id>` + `LABEL` build with the Engine's
classic builder, which adds no filesystem layer), carrying:

    io.envbuild.verified=true
    io.envbuild.smoke.device=<cpu|gpu>
    io.envbuild.smoke.report-digest=sha256:<report_digest of {image, device, report}>
    io.envbuild.smoke.framework=<torch|tensorflow|jax>
    io.envbuild.audit.<sm_XY>=<native|same-major|ptx-only>   (from `envbuild build`'s audit gate)

Pushes report failures inside the progress stream rather than as an HTTP error, so every chunk is
read and an "error"/"errorDetail" chunk counts as a failure; the digest comes from the
{"aux": {"Digest": ...}} chunk. Nothing here prints, and no credential ever goes in a message: the
Engine relays what the registry answered, which may echo the credentials it was sent, so Engine text
passes through `redact` before it is put in an error.

`docker` is imported inside the functions: importing this module costs nothing at start-up.
"""

from __future__ import annotations

import io
import json
import re
import time

from envbuild._util.http import attempts
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import PromoteError, UsageError
from envbuild.image.trust import TrustedReport, trusted_report
from envbuild.image.verify import report_digest, report_document
from envbuild.oci.labels import AUDIT, SMOKE_DEVICE, SMOKE_FRAMEWORK, SMOKE_REPORT_DIGEST, VERIFIED
from envbuild.oci.reference import parse_reference, registry_host, split_tag
from envbuild.oci.referrers import promote_with_referrers
from envbuild.oci.registry import ImagePlatform, image_platform, push_index
from envbuild.smoke.report import gate_problems, validate

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "IndexPromotion",
    "PlatformImage",
    "Promotion",
    "labels_for",
    "promote",
    "promote_in_registry",
    "promote_index_reported",
    "promote_platforms",
    "promote_reported",
    "report_digest",
]

PUSH_TIMEOUT_S = 600
PROGRESS_EVERY_S = 5.0  # a push progress line at most this often


class Promotion(Record):
    """image_id: the promoted (labelled) image; tags: the tags it got; pushed: ((tag, digest), ...);
    device: where its smoke step passed (cpu or gpu)."""

    __slots__ = ("image_id", "tags", "pushed", "device")
    image_id: str
    tags: tuple[str, ...]
    pushed: tuple[tuple[str, str], ...]
    device: str


def labels_for(image_id: str, report: dict, device: str) -> dict[str, str]:
    """The labels of the promoted image; the digest is the one `verify --report` writes in its file."""
    return {
        VERIFIED: "true",
        SMOKE_DEVICE: device,
        SMOKE_REPORT_DIGEST: report_digest(report_document(image_id, device, report)),
        SMOKE_FRAMEWORK: str(report.get("framework", "")),
    }


def _dockerfile(image_id: str, labels: dict[str, str]) -> bytes:
    # one LABEL instruction: the classic builder commits an image per instruction, and intermediate
    # images would be left behind as parents of the promoted one
    pairs = " ".join(f"{key}={json.dumps(value)}" for key, value in labels.items())
    return f"FROM {image_id}\nLABEL {pairs}\n".encode()


def _chunk_error(chunk: object) -> str | None:
    if not isinstance(chunk, dict):
        return None
    if chunk.get("error") or chunk.get("errorDetail"):
        detail = chunk.get("errorDetail")
        message = chunk.get("error") or (detail.get("message") if isinstance(detail, dict) else detail)
        return redact(str(message or "unknown error").strip())
    return None


def promote(
    image_id: str,
    *,
    tags: list[str],
    report: dict,
    device: str,
    push: bool = False,
    retries: int = 3,
    labels: dict[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> Promotion:
    """Label the verified image `image_id`, tag it with every tag, and push them when `push`.

    `retries` is how many more times a failed push of one tag is tried (envbuild._util.http's policy).
    The report is judged again here, with the gates of the smoke step, whoever calls. `labels`: more
    io.envbuild.audit.* labels (the audit gate's verdicts) for the promoted image. `say` gets a
    progress line every few seconds of a push (PushProgress).
    """
    problems = ["report: not an object"] if not isinstance(report, dict) else []
    problems = problems or validate(report) or gate_problems(report, device)
    if problems:
        raise PromoteError(
            "only images whose smoke step passed are promoted: " + "; ".join(problems[:5]),
            fix="fix what the smoke report's failed gates name, rebuild, and verify again",
        )
    if not tags:
        raise UsageError("promote needs at least one tag", fix="pass one or more REPOSITORY:TAG")
    import docker.errors

    try:
        client = current_engine().client(timeout=PUSH_TIMEOUT_S)
    except EngineError as exc:
        raise PromoteError(f"cannot reach the {current_engine().title}: {exc.message}", fix=exc.fix) from None

    extra = {key: value for key, value in (labels or {}).items() if key.startswith(AUDIT)}
    promoted = _label(client, image_id, {**labels_for(image_id, report, device), **extra})
    for ref in tags:
        repository, tag = split_tag(ref)
        try:
            client.api.tag(promoted, repository, tag=tag, force=True)
        except docker.errors.APIError as exc:
            raise PromoteError(
                f"tagging the promoted image as {ref} failed: {redact(str(exc.explanation or exc))}",
                fix="check the tag: REPOSITORY[:TAG] with a lowercase repository",
            ) from None

    pushed: list[tuple[str, str]] = []
    if push:
        for ref in tags:
            try:
                pushed.append((ref, _push(client, ref, retries, say)))
            except PromoteError as exc:
                exc.pushed = tuple(pushed)  # type: ignore[attr-defined]  # what did make it, for callers
                raise
    return Promotion(image_id=promoted, tags=tuple(tags), pushed=tuple(pushed), device=device)


def promote_reported(image: str, *, report_path: str | None, tags: list[str], push: bool) -> Promotion:
    """`envbuild promote IMAGE --report FILE --tag ...`: promote the local image the report of
    `envbuild verify --report` was made for, and no other."""
    if not report_path:
        raise UsageError(
            "promote needs --report FILE (from envbuild verify --report), or --to TAG for a "
            "REPO@sha256:... in a registry",
            fix="see envbuild promote --help",
        )
    if not tags:
        raise UsageError("promote needs at least one --tag REPO:TAG", fix="e.g. --tag ghcr.io/acme/train:v1")
    trusted = trusted_report(report_path, _local_image_id(image))
    return promote(trusted.image_id, tags=tags, report=trusted.report, device=trusted.device, push=push)


def promote_in_registry(image: str, to: list[str], *, report_path: str | None) -> list[tuple[str, str]]:
    """`envbuild promote REPO@sha256:... --to TAG ...`: registry-side promotion by digest; with a
    report, only when trusted_report accepts it for the image id the registry holds under that digest."""
    if not report_path:
        return promote_with_referrers(image, to)
    path = report_path
    return promote_with_referrers(image, to, vouch=lambda image_id: trusted_report(path, image_id))


def _local_image_id(image: str) -> str:
    try:
        found = current_engine().image_id(image)
    except EngineError as exc:
        raise PromoteError(f"cannot reach the {current_engine().title}: {exc.message}", fix=exc.fix) from None
    if found is None:
        raise PromoteError(
            f"image {image!r} is not in this {current_engine().title}", fix="build and verify it first"
        )
    return found


def _label(client: object, image_id: str, labels: dict[str, str]) -> str:
    """Build FROM image_id + LABELs with the classic builder; the new image's id."""
    import docker.errors

    api = client.api  # type: ignore[attr-defined]
    try:
        api.inspect_image(image_id)
    except docker.errors.ImageNotFound:
        raise PromoteError(
            f"image {image_id!r} is not in this {current_engine().title}", fix="build and verify it first"
        ) from None
    built: str | None = None
    try:
        stream = api.build(
            fileobj=io.BytesIO(_dockerfile(image_id, labels)),
            decode=True,
            rm=True,
            forcerm=True,
            pull=False,
        )
        for chunk in stream:
            error = _chunk_error(chunk)
            if error:
                raise PromoteError(
                    f"labelling the verified image failed: {error}",
                    fix="check that dockerd is healthy (`docker info`) and the image id is right",
                )
            aux = chunk.get("aux") if isinstance(chunk, dict) else None
            if isinstance(aux, dict) and aux.get("ID"):
                built = str(aux["ID"])
    except docker.errors.APIError as exc:
        raise PromoteError(
            f"labelling the verified image failed: {redact(str(exc.explanation or exc))}",
            fix="check that dockerd is healthy (`docker info`) and the image id is right",
        ) from None
    if not built:
        raise PromoteError(
            "labelling the verified image produced no image id",
            fix="check that dockerd is healthy (`docker info`)",
        )
    return built


class PushProgress:
    """Bytes pushed so far, from the Engine's push stream, as a line every PROGRESS_EVERY_S: a CUDA
    image's 6 GB took 130 s to push here, and without a line the build looked hung.

    Each layer's "Pushing" chunk carries its progressDetail (current and total bytes of that layer);
    "Pushed", "Layer already exists" and "Mounted from" end a layer."""

    def __init__(self, ref: str, say: Callable[[str], None] | None) -> None:
        self.ref = ref
        self.say = say
        self.layers: dict[str, tuple[int, int]] = {}  # layer id -> (bytes sent, bytes in all)
        self.done: set[str] = set()
        self.last = time.monotonic()

    def update(self, chunk: object) -> None:
        if self.say is None or not isinstance(chunk, dict) or not isinstance(chunk.get("id"), str):
            return
        layer, status = chunk["id"], str(chunk.get("status") or "")
        detail = chunk.get("progressDetail") if isinstance(chunk.get("progressDetail"), dict) else {}
        current, total = detail.get("current"), detail.get("total")
        if status == "Pushing" and isinstance(current, int) and isinstance(total, int) and total > 0:
            self.layers[layer] = (min(current, total), total)
        elif status in ("Pushed", "Layer already exists") or status.startswith("Mounted from"):
            self.done.add(layer)
            if layer in self.layers:
                self.layers[layer] = (self.layers[layer][1], self.layers[layer][1])
        if time.monotonic() - self.last >= PROGRESS_EVERY_S:
            self.last = time.monotonic()
            sent = sum(current for current, _ in self.layers.values())
            total = sum(total for _, total in self.layers.values())
            self.say(
                f"push {self.ref}: {sent / 1e6:,.0f} of {total / 1e6:,.0f} MB of the layers started, "
                f"{len(self.done)} layer(s) done"
            )


_STATUS_DIGEST = re.compile(r"\bdigest: (sha256:[0-9a-f]{64})\b")


def pushed_digest(chunk: object) -> str | None:
    """The manifest digest a push stream's chunk reports: Docker's {"aux": {"Digest": ...}}, or the
    status line "TAG: digest: sha256:... size: N", which is all Podman's compat API sends."""
    if not isinstance(chunk, dict):
        return None
    aux = chunk.get("aux")
    if isinstance(aux, dict) and isinstance(aux.get("Digest"), str):
        return str(aux["Digest"])
    match = _STATUS_DIGEST.search(str(chunk.get("status") or ""))
    return match.group(1) if match else None


def _push(client: object, ref: str, retries: int, say: Callable[[str], None] | None = None) -> str:
    """Push one tag, reading the whole stream; its manifest digest, or a PromoteError after retries."""
    import docker.errors
    import requests

    repository, tag = split_tag(ref)
    api = client.api  # type: ignore[attr-defined]
    error = "unknown error"
    for _ in attempts(retries):
        digest: str | None = None
        error = ""
        progress = PushProgress(ref, say)
        try:
            for chunk in api.push(repository, tag=tag, stream=True, decode=True):
                progress.update(chunk)
                failure = _chunk_error(chunk)
                if failure:
                    error = failure
                    continue  # read to the end: the daemon closes the stream after an error
                digest = pushed_digest(chunk) or digest
        except docker.errors.APIError as exc:
            error = str(exc.explanation or exc)
        except requests.exceptions.RequestException as exc:
            error = f"lost the connection to the {current_engine().title}: {exc}"
        if not error and digest:
            return digest
        if not error:
            error = "the push stream ended without a digest"
    host = registry_host(repository)
    raise PromoteError(
        f"pushing {ref} failed: {redact(error)}",
        fix=f"check the registry is reachable and you are logged in (docker login {host})",
    )


# --- a target with several platforms: one index over the verified per-platform images -------------------


class PlatformImage(Record):
    """One platform's image of a multi-platform target, for promote_platforms.

    ref: REPO@sha256:<its manifest digest>, as its push reported (every ref in one repository).
    platform: what it was built and verified for (matrix.platforms spelling), or None to take the one
    its config records. report: the verify report that vouches for it (trusted_report for a file;
    `envbuild build` passes its own), or None: then the image must carry io.envbuild.verified=true,
    as `promote --to` without --report asks today."""

    __slots__ = ("ref", "platform", "report")
    ref: str
    platform: str | None
    report: TrustedReport | None


class IndexPromotion(Record):
    """index: REPO@sha256:<the pushed index>; platforms: ((platform, image digest), ...) in the index's
    order; promoted: [(REPO:TAG, index digest), ...] as promote_by_digest answers."""

    __slots__ = ("index", "platforms", "promoted")
    index: str
    platforms: tuple[tuple[str, str], ...]
    promoted: tuple[tuple[str, str], ...]


def _platform_problem(entry: PlatformImage, found: ImagePlatform) -> str | None:
    """Why `found` (what the registry holds) is not the image `entry` says it is, or None."""
    from envbuild.matrix.platforms import by_machine, normalize

    recorded = by_machine(found.architecture) if found.os == "linux" else None
    if recorded is None:
        return f"its config records {found.os}/{found.architecture}, a platform envbuild does not build"
    given = normalize(entry.platform) if entry.platform is not None else recorded.name
    if given != recorded.name:
        return f"it was given as {given}, but its config records {recorded.name}"
    report = entry.report
    if report is None:
        if found.labels.get(VERIFIED) != "true":
            return f"it carries no {VERIFIED} label and no --report vouches for it"
        return None
    if report.image_id != found.image_id:
        return f"its report was made for {report.image_id[:19]}, not for its image id {found.image_id[:19]}"
    problems = validate(report.report) or gate_problems(report.report, report.device)
    if problems:
        return "its report does not show a passing smoke step: " + "; ".join(problems[:5])
    return None


def promote_platforms(
    images: list[PlatformImage], to: list[str], *, docker_config: str | None = None
) -> IndexPromotion:
    """Push one OCI image index over every platform's verified image and tag it with `to`.

    Nothing is tagged unless every platform's smoke step passed: each image is checked first (it is in
    the repository, it is one platform's image of the platform it is said to be, and its report names
    its image id and passes, or it carries the verified label), and only then is the index pushed and
    promoted by digest, exactly as a single-platform image is. `envbuild build` calls this for a target
    with several platforms; `envbuild promote A@sha256:.. B@sha256:.. --to TAG` for the CLI."""
    from envbuild.matrix.platforms import by_machine

    if len(images) < 2:
        raise UsageError(
            "a multi-platform index needs two or more platform images",
            fix="promote a single image with `envbuild promote REPO@sha256:... --to TAG`",
        )
    if not to:
        raise UsageError("promote needs at least one --to TAG", fix="e.g. --to v1")
    parsed = [parse_reference(image.ref) for image in images]
    repositories = {(p.api_host, p.repository) for p in parsed}
    if len(repositories) > 1:
        raise UsageError(
            f"{', '.join(image.ref for image in images)} are in different repositories: an index lists "
            "images of its own repository only",
            fix="push every platform's image to one repository and pass their digests there",
        )
    found = [image_platform(image.ref, docker_config=docker_config) for image in images]
    for entry, image in zip(images, found, strict=True):
        problem = _platform_problem(entry, image)
        if problem:
            raise PromoteError(
                f"{entry.ref}: {problem}: refusing to promote any platform",
                fix="verify each platform's image (envbuild verify IMAGE --report FILE) and promote it with "
                "the report verify wrote for it",
            )
    repository = parsed[0].name
    digest = push_index(repository, found, docker_config=docker_config)
    index = f"{repository}@{digest}"
    promoted = promote_with_referrers(index, to, docker_config=docker_config, vouch=lambda _image_id: None)
    platforms = tuple(
        (by_machine(image.architecture).name, image.digest)  # type: ignore[union-attr]  # checked above
        for image in found
    )
    return IndexPromotion(index=index, platforms=platforms, promoted=tuple(promoted))


def promote_index_reported(images: list[str], to: list[str], *, report_paths: list[str]) -> IndexPromotion:
    """`envbuild promote A@sha256:... B@sha256:... --to TAG [--report A.json --report B.json]`: the
    reports pair with the images in order (none: every image must carry the verified label)."""
    if report_paths and len(report_paths) != len(images):
        raise UsageError(
            f"promote got {len(images)} images and {len(report_paths)} --report files",
            fix="pass one --report per image, in the same order, or none (then each image must carry "
            f"the {VERIFIED} label)",
        )
    entries = []
    for position, ref in enumerate(images):
        report = None
        if report_paths:
            found = image_platform(ref)
            report = trusted_report(report_paths[position], found.image_id)
        entries.append(PlatformImage(ref=ref, platform=None, report=report))
    return promote_platforms(entries, to)
