"""`verify`: run the smoke program inside a built image, the way a training job would run it.

`verify_image(image, device="gpu")` creates a container from the image (its own non-root USER, no
network), asks the Engine for every GPU when device is "gpu", runs
`python /opt/envbuild/smoke.py --device D --steps N --precision P`, reads the JSON report from the
last line of its stdout and checks it against smoke/schema.json. The program runs the image's own
[smoke] checks after its training step; `imports=` / `command=` replace them for this run. The
container is always removed, in a `finally`, on success, failure, timeout and interrupt alike (Ctrl-C,
SIGTERM, SIGHUP: the CLI turns all three into KeyboardInterrupt), within
image.containers.REMOVE_TIMEOUT_S.

Errors the Engine reports when it cannot give the container a GPU are turned into messages that say
what to fix (`explain_engine_error`). Nothing here prints: callers print.

`docker` and `requests` are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from envbuild._util.files import write_atomic
from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.engine import current_engine
from envbuild.engine.base import QUICK_S, ContainerEngine, EngineError
from envbuild.engine.cdi import ALL_GPUS, GENERATE_FIX, NO_SPEC, gpu_path
from envbuild.errors import EnvbuildError, UsageError, VerifyError
from envbuild.image.containers import remove_container
from envbuild.image.platforms import Runnable, describe, platform_of, runnable
from envbuild.matrix.load import load_matrix
from envbuild.matrix.platforms import accepted
from envbuild.matrix.versions import format_driver
from envbuild.oci.labels import ROLE
from envbuild.preflight import refusal, smoke_environment
from envbuild.smoke import (
    DEFAULT_PRECISION,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT_S,
    DEVICES,
    smoke_command,
)
from envbuild.smoke.report import (
    PROGRESS_PREFIX,
    gate_problems,
    parse_report,
    redact_checks,
    validate,
    without_progress,
)

if TYPE_CHECKING:
    from collections.abc import Callable

_NO_GPU_RE = re.compile(r'could not select device driver "[^"]*" with capabilities: \[\[[^\]]*\bgpu\b')
_CUDA_CONDITION_RE = re.compile(r"unsatisfied condition: cuda\s*>=\s*(\d+)\.(\d+)")


class Verification(Record):
    """What one smoke run inside an image gave.

    report: the parsed, schema-valid smoke report. passed: report["passed"] and exit code 0.
    seconds: wall time from container start to exit. device: "cpu" or "gpu" as requested.
    exit_code: the smoke program's exit status. image_id: the "sha256:..." id of the image it ran.
    platform: the image's (linux/arm64), None when the Engine named an architecture envbuild does not
    know. emulated: the smoke step ran through QEMU (binfmt_misc), on a host of another architecture.
    runtime: what ran the container (docker, apptainer, enroot, charliecloud; envbuild.runtime).
    """

    __slots__ = (
        "report",
        "passed",
        "seconds",
        "device",
        "exit_code",
        "image_id",
        "platform",
        "emulated",
        "runtime",
    )
    report: dict
    passed: bool
    seconds: float
    device: str
    exit_code: int
    image_id: str
    platform: str | None
    emulated: bool
    runtime: str


def _driver_floor(major: int, minor: int) -> str | None:
    """The minimum driver of CUDA major.minor from the bundled matrix, formatted, or None."""
    try:
        row = load_matrix().ga_floor.get((major, minor))
    except (EnvbuildError, OSError, ValueError):
        return None
    if row is None or not row.min_driver:
        return None
    return format_driver(row.min_driver)


def explain_engine_error(text: str) -> VerifyError | None:
    """A VerifyError saying what to fix for an Engine error text we recognise, else None.

    Pure apart from reading the bundled matrix for the driver floor of an unsatisfied CUDA condition.
    """
    if 'device driver "cdi"' in text or "CDI device injection" in text or "unresolvable CDI devices" in text:
        engine = current_engine()
        if engine.name == "podman":  # Podman reads its own spec directories (containers.conf)
            fix = f"the device must be in a spec in /etc/cdi or /var/run/cdi: {GENERATE_FIX}"
        else:
            fix = (
                "Docker 25 or later serves CDI (enable the `cdi` feature in /etc/docker/daemon.json on "
                f"25-27), and the device must be in a spec ({GENERATE_FIX}); or run with --gpu-access legacy"
            )
        return VerifyError(
            f"this {engine.title} did not give the container the CDI device {ALL_GPUS}: {redact(text)}",
            fix=fix,
        )
    if _NO_GPU_RE.search(text):
        return VerifyError(
            "this Docker host cannot give containers a GPU: install or configure the NVIDIA Container "
            "Toolkit, or use `--smoke-device cpu` on CPU-only CI",
            fix="install nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker` "
            "and restart dockerd; check with `docker run --rm --gpus all <image> nvidia-smi`",
        )
    match = _CUDA_CONDITION_RE.search(text)
    if match:
        major, minor = int(match.group(1)), int(match.group(2))
        floor = _driver_floor(major, minor)
        needs = f">= {floor}" if floor else f"the CUDA {major}.{minor} minimum"
        return VerifyError(
            f"the host driver is too old for this image: needs {needs} (CUDA {major}.{minor})",
            fix="upgrade the host's NVIDIA driver, or build for an older CUDA that this driver supports "
            "(`envbuild doctor` shows the host driver; `nvidia-smi` its version)",
        )
    return None


def _engine_error(exc: Exception, doing: str) -> VerifyError:
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    known = explain_engine_error(str(text)) or explain_engine_error(str(exc))
    if known is not None:
        return known
    return VerifyError(
        f"the {current_engine().title} could not {doing} the smoke container: {redact(str(text))}",
        fix="check the image reference and that the engine is healthy (`docker info`, `podman info`)",
    )


def smoke_timed_out(timeout: int) -> VerifyError:
    """The error of a smoke step that ran past its timeout, whichever runtime ran it."""
    return VerifyError(
        f"the smoke step did not finish within {timeout}s",
        fix="a hang in the first steps usually means a driver or NCCL problem (run nvidia-smi, retry "
        "with NCCL_DEBUG=INFO); a slow but healthy image needs a larger [smoke] timeout",
    )


def tail_lines(text: str, lines: int = 5) -> str:
    tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(tail)


def verify_image(
    image: str,
    *,
    device: str = "gpu",
    steps: int = DEFAULT_STEPS,
    precision: str = DEFAULT_PRECISION,
    timeout: int = DEFAULT_TIMEOUT_S,
    env: dict[str, str] | None = None,
    imports: tuple[str, ...] | None = None,
    command: str | None = None,
    say: Callable[[str], None] | None = None,
    gpu_access: str = "auto",
) -> Verification:
    """Run the image's smoke program in a throw-away container; the container never outlives the call.

    imports / command: the checks to run after the training step instead of the image's (None: the
    image's own [smoke] checks, if it has any). say: gets the program's progress lines as they come
    (SmokeProgress)."""
    if device not in DEVICES:
        raise UsageError(f"smoke device {device!r} is not valid", fix="use one of: cpu, gpu")
    import docker
    import docker.errors
    import requests

    engine = current_engine()
    try:
        client = engine.client(timeout=max(timeout, QUICK_S))
    except EngineError as exc:
        raise VerifyError(f"cannot reach the {engine.title}: {exc.message}", fix=exc.fix) from None

    if "@sha256:" in image:  # a candidate from a remote builder: pull it by digest when it is not local
        try:
            if engine.inspect_image(image) is None:
                engine.pull(image)
        except EngineError as exc:
            raise VerifyError(
                f"cannot pull {image}: {exc.message}",
                fix="check the registry is reachable and you are logged in (docker login)",
            ) from None

    platform, run = _how_it_runs(client, image, device)
    options: dict[str, object] = {
        "command": list(smoke_command(device, steps, precision, imports=imports, command=command)),
        "name": f"envbuild-smoke-{uuid.uuid4().hex[:12]}",
        "network_disabled": True,
        "network_mode": "none",
        "labels": {ROLE: "smoke"},
        "environment": smoke_environment(device, env) or None,
        "detach": True,
    }
    path = engine_gpu_path(engine, gpu_access) if device == "gpu" else None

    container = None
    try:
        try:
            container = engine.create_container(client, image, options, gpu=path)
        except docker.errors.NotFound as exc:
            if not _no_such_image(exc):
                raise _engine_error(exc, "create") from None
            raise VerifyError(
                f"image {image!r} is not in this {engine.title}",
                fix="build it first (`envbuild build`), or pull it",
            ) from None
        except docker.errors.APIError as exc:
            raise _engine_error(exc, "create") from None
        image_id = str(container.attrs.get("Image") or "")
        started = time.monotonic()
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise _engine_error(exc, "start") from None
        watching = SmokeProgress(container, say) if say else None
        try:
            result = container.wait(timeout=timeout)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
            waited = time.monotonic() - started
            if isinstance(exc, requests.exceptions.Timeout) or waited >= timeout * 0.9:
                with contextlib.suppress(docker.errors.APIError):
                    container.kill()
                raise smoke_timed_out(timeout) from None
            raise VerifyError(
                f"lost the connection to the Docker Engine while the smoke step ran: {exc}",
                fix="check that dockerd is healthy (`docker info`) and retry",
            ) from None
        seconds = round(time.monotonic() - started, 3)
        if watching is not None:
            watching.finish()
        exit_code = int(result.get("StatusCode", -1))
        stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
    finally:
        remove_container(
            client,
            container,
            str(options["name"]),
            quiet=sys.exc_info()[1] is not None,
            what="smoke",
            error=VerifyError,
        )

    verification = judge_output(
        stdout,
        stderr,
        exit_code,
        device=device,
        seconds=seconds,
        image_id=image_id,
        platform=platform,
        emulated=bool(run is not None and run.emulated),
        runtime=engine.name,
        checks=asked_checks(imports, command),
    )
    verification.report["gpu_access"] = path  # a host fact, as the runtime is: which GPU path ran
    return verification


def engine_gpu_path(engine: ContainerEngine, gpu_access: str) -> str:
    """The path a GPU smoke step on `engine` takes ("cdi" | "legacy"), or the VerifyError saying why
    there is none: no spec names nvidia.com/gpu=all where CDI is needed, or `legacy` asked of an
    engine without it (Podman reaches GPUs only through CDI)."""
    if gpu_access == "legacy" and "legacy" not in engine.gpu_paths:
        raise VerifyError(
            f"{engine.title} has no legacy GPU request: it reaches GPUs only through CDI",
            fix=f"run with --gpu-access cdi (or auto); if no spec exists, {GENERATE_FIX}",
        )
    path = gpu_path(gpu_access)
    if path not in engine.gpu_paths:
        other = ", or run with --gpu-access legacy" if "legacy" in engine.gpu_paths else ""
        raise VerifyError(NO_SPEC, fix=f"{GENERATE_FIX}{other}")
    return str(path)


def _no_such_image(exc: Exception) -> bool:
    """Whether an engine's 404 to a create is for the image (Docker: "No such image", Podman's libpod:
    "image not known"), not for something else the request named."""
    text = str(getattr(exc, "explanation", None) or exc).lower()
    return "no such image" in text or "image not known" in text or ("not found" in text and "image" in text)


def asked_checks(imports: tuple[str, ...] | None, command: str | None) -> tuple[tuple[str, str], ...] | None:
    """The (kind, name) of each check a run was asked for on its command line, in the order the program
    runs them; None when it was asked for none, and runs the image's own (which only the image knows).
    Each kind replaces the image's own of that kind only: --smoke-import alone keeps its command."""
    if not imports and command is None:
        return None
    asked = [("import", name) for name in imports or ()]
    return (*asked, *((("command", command),) if command is not None else ()))


PROGRESS_WIDTH = 200  # characters of one progress line shown


class SmokeProgress:
    """Shows the smoke program's progress lines (importing, each training step, each check) while the
    container runs: a thread follows the container's stderr and says each such line, redacted and cut
    to PROGRESS_WIDTH; any other line is left for the report's judging. The stream ends when the
    container does; `finish` waits a moment for the last lines, and a stream error ends the showing,
    never the smoke step."""

    def __init__(self, container: Any, say: Callable[[str], None]) -> None:
        import threading

        self.container = container
        self.say = say
        self.thread = threading.Thread(target=self._follow, name="envbuild-smoke-progress", daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        pending = b""
        try:
            for chunk in self.container.logs(stream=True, follow=True, stdout=False, stderr=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._show(line.decode("utf-8", "replace"))
        except Exception:  # the Engine closed the stream, or the container is gone: nothing to show
            return

    def _show(self, line: str) -> None:
        if line.startswith(PROGRESS_PREFIX):
            text = redact(line[len(PROGRESS_PREFIX) :].strip())
            self.say(f"smoke: {text[:PROGRESS_WIDTH]}")

    def finish(self) -> None:
        self.thread.join(timeout=5)


def check_schema(report: dict) -> None:
    """A VerifyError naming the first problems when `report` does not match smoke/schema.json: every
    field is typed before any gate or reader uses it."""
    problems = validate(report)
    if problems:
        raise VerifyError(
            "the smoke report does not match envbuild/smoke/schema.json: " + "; ".join(problems[:5]),
            fix="the image's smoke program and this envbuild disagree: rebuild the image with this version",
        )


def judge_output(
    stdout: str,
    stderr: str,
    exit_code: int,
    *,
    device: str,
    seconds: float,
    image_id: str,
    platform: str | None,
    emulated: bool,
    runtime: str,
    checks: tuple[tuple[str, str], ...] | None = None,
) -> Verification:
    """The Verification of one smoke run's output, whichever runtime ran it (Docker, Apptainer, Enroot,
    Charliecloud): every runtime's report goes through the same schema and the same gates, so promotion
    cannot tell, and need not care, where the smoke step ran; only the report's `runtime` says.

    checks: the (kind, name) of the checks the run was asked for (asked_checks); a passing report must
    show each of them run. The user's checks print what they like, so their text is redacted here."""
    stderr = without_progress(stderr)  # the error a failed run explains itself with, not its steps
    refused = refusal(exit_code, stderr)
    if refused is not None:  # the guard stopped it before the program: say what it found, not "no report"
        raise VerifyError(refused[0], fix=refused[1])
    report = parse_report(stdout)
    if report is None:
        tail = tail_lines(stderr) or tail_lines(stdout)
        raise VerifyError(
            f"the smoke program printed no report (exit {exit_code})",
            fix=("its last output was: " + tail) if tail else "it printed nothing at all",
        )
    check_schema(report)
    # what only the host knows: which platform's image ran, whether QEMU ran it (host facts, not the
    # program's: an emulated program reports the image's machine as its own) and which runtime ran it
    report["image_platform"] = platform
    report["emulated"] = emulated
    report["runtime"] = runtime
    doubts = gate_problems(report, device, checks=checks) if report["passed"] else []
    redact_checks(report)  # after the judging: a redacted command is not the command asked for
    if doubts:  # what promotion would refuse: the program said passed, its own numbers do not
        raise VerifyError(
            "the smoke report says it passed, but " + "; ".join(doubts[:5]),
            fix="the image's smoke program and this envbuild disagree: rebuild the image with this version",
        )
    return Verification(
        report=report,
        passed=bool(report["passed"]) and exit_code == 0,
        seconds=seconds,
        device=device,
        exit_code=exit_code,
        image_id=image_id,
        platform=platform,
        emulated=emulated,
        runtime=runtime,
    )


def _how_it_runs(client: Any, image: str, device: str) -> tuple[str | None, Runnable | None]:
    """(the image's platform, how this host runs it); a VerifyError when it cannot run it at all, or
    when a GPU smoke step would have to run emulated. (None, None) for an image the Engine does not
    have: creating the container says so, with its own fix."""
    import docker.errors

    try:
        attrs = client.images.get(image).attrs
    except docker.errors.ImageNotFound:
        return None, None
    except docker.errors.APIError as exc:
        raise _engine_error(exc, "inspect the image of") from None
    platform = platform_of(attrs)
    if platform is None:
        raise VerifyError(
            f"image {image!r} is for {describe(attrs)}, a platform envbuild does not build or verify",
            fix=f"verify an image built for one of: {accepted()} (`[stack] platform` in the spec)",
        )
    return platform, check_runnable(image, platform, device)


def check_runnable(image: str, platform: str, device: str) -> Runnable:
    """How this host runs `image` of `platform`; a VerifyError when it cannot run it at all, or when a
    GPU smoke step would have to run emulated. Every runtime asks here before it gets the image."""
    run = runnable(platform)
    if not run.ok:
        raise VerifyError(f"cannot run the smoke step of {image!r}: {run.reason}", fix=run.fix)
    if run.emulated and device == "gpu":
        raise VerifyError(
            f"image {image!r} is {platform} and this host is {run.host}: it would run under QEMU "
            "emulation, which reaches no GPU, so a GPU smoke step cannot run here",
            fix=f"run `envbuild verify` on a {platform} GPU host, or check it here on the CPU with "
            "--smoke-device cpu (emulated, slow)",
        )
    return run


# --- the report file `verify --report` writes and `promote --report` reads ----------------------

REPORT_DIGEST = "report-digest"  # the report file's key for the digest of the rest of it


def report_digest(document: dict) -> str:
    """ "sha256:" + the sha256 of the document's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def report_document(image_id: str, device: str, report: dict) -> dict:
    """{image, device, report}: a smoke report tied to the one image id and device it ran on.

    Its report_digest is what the report file, record.json and the promoted image's
    io.envbuild.smoke.report-digest label carry, so the three can be matched to each other.
    """
    return {"image": image_id, "device": device, "report": report}


def save_report(path: str, verification: Verification) -> None:
    """{image, device, report, report-digest}: what promote needs to tie a passing smoke step to one
    image id. The digest catches a file edited after this wrote it; it is no signature
    (docs/concepts/trust-model.md)."""
    document = report_document(verification.image_id, verification.device, verification.report)
    write_atomic(path, json.dumps({**document, REPORT_DIGEST: report_digest(document)}, indent=2) + "\n")
