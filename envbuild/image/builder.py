"""Build backends: run `docker build` on a rendered context and return the (untagged) image id.

Two backends. `api` talks to the Engine through the docker SDK and the classic builder; it works with
any Engine and needs no client binary. `buildkit` runs the docker client with DOCKER_BUILDKIT=1 and
`--progress=plain`; it caches better (`RUN --mount`, parallel stages) but needs a client that can run
BuildKit builds: the 20.10/22.x client with its embedded BuildKit, or a newer one with buildx.

Both write the full build output to a log file as they go, report "step n/m: <instruction>" lines to a
progress callback, never tag the image, and turn a failed build into a BuildError that names the step.
Every line of Engine output passes through `redact` before it reaches the log, the progress callback
or an error: a build that pulls from a registry or fetches a URL can print credentials.
The docker SDK is imported inside functions: `envbuild resolve` must not pay for it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild._util.redact import redact
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import BuildError, UsageError
from envbuild.image.buildcause import StepWords, buildkit_output
from envbuild.image.buildfailure import build_failure as _failure
from envbuild.image.buildfailure import step_name
from envbuild.image.platforms import describe, host_platform, platform_of
from envbuild.matrix.platforms import normalize

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

BACKENDS = ("auto", "buildkit", "api")

# classic builder: "Step 4/10 : RUN pip install ..."
_API_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
# BuildKit plain progress: "#7 [ 4/10] RUN ...", "#9 [builder 2/5] COPY ...", "#3 [internal] load ..."
_BK_LINE = re.compile(r"^#(\d+) (.*)$")
_BK_STEP = re.compile(r"^\[(?:([^\]\s]+) +)? *(\d+)/(\d+)\] (.*)$")
_ERROR_WORD = re.compile(r"error", re.IGNORECASE)
_STDERR_START = "\x1b[91m"  # the classic builder's colour around a RUN's stderr
_STDERR_END = "\x1b[0m"


class BuildResult(Record):
    __slots__ = ("image_id", "backend", "seconds", "steps")
    image_id: str  # "sha256:..."
    backend: str  # "api" | "buildkit" | "podman"
    seconds: float
    steps: int  # distinct steps seen in the output


def docker_cli() -> str | None:
    """$DOCKER_CLI, else Debian's /usr/bin/docker (BuildKit-capable), else the first docker on PATH."""
    explicit = os.environ.get("DOCKER_CLI")
    if explicit:
        return explicit
    if os.path.exists("/usr/bin/docker"):
        return "/usr/bin/docker"
    return shutil.which("docker")


_BUILDKIT_CACHE: dict[str, bool] = {}


def _client_major(cli: str) -> int | None:
    try:
        # exits 1 when the Engine is unreachable, but still prints the client version
        out = subprocess.run(
            [cli, "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"(\d+)\.", out)
    return int(match.group(1)) if match else None


def buildkit_available(cli: str | None = None) -> bool:
    """Whether `cli` can run BuildKit builds: a 20.10/22.x client (embedded BuildKit) or buildx."""
    cli = cli or docker_cli()
    if not cli:
        return False
    if cli not in _BUILDKIT_CACHE:
        major = _client_major(cli)
        if major is not None and major < 23:
            ok = True
        else:
            try:
                ok = (
                    subprocess.run(
                        [cli, "buildx", "version"], capture_output=True, timeout=20, check=False
                    ).returncode
                    == 0
                )
            except (OSError, subprocess.SubprocessError):
                ok = False
        _BUILDKIT_CACHE[cli] = ok
    return _BUILDKIT_CACHE[cli]


def choose_backend(requested: str) -> str:
    """The backend a build with `--builder requested` uses on the current engine: Podman builds
    with `podman build` whatever `auto` would pick on Docker; api and buildkit are Docker's own."""
    if current_engine().name == "podman":
        if requested not in ("auto", "podman"):  # podman: the backend a render already chose
            raise UsageError(
                f"--builder {requested} is a Docker Engine builder; Podman builds with `podman build`",
                fix="use --builder auto with --engine podman, or --engine docker for this builder",
            )
        return "podman"
    if requested not in BACKENDS:
        raise UsageError(
            f"unknown builder {requested!r}", fix=f"use one of: {', '.join(BACKENDS)} (e.g. --builder auto)"
        )
    if requested == "api":
        return "api"
    if buildkit_available():
        return "buildkit"
    if requested == "auto":
        return "api"
    raise BuildError(
        f"the docker client ({docker_cli() or 'none found'}) cannot run BuildKit builds",
        fix="install docker-buildx, or use --builder api",
    )


def runs_mounts(backend: str) -> bool:
    """Whether `backend` runs `RUN --mount=type=bind` (the plan's `buildkit`): BuildKit and podman's
    buildah do; the classic builder does not, and gets a context that COPYs instead."""
    return backend in ("buildkit", "podman")


def build_image(
    context: str,
    *,
    backend: str,
    log_path: str,
    no_cache: bool = False,
    progress: Callable[[str], None] | None = None,
    labels: dict[str, str] | None = None,
    platform: str | None = None,
) -> BuildResult:
    """Build `context` untagged with `backend` ("api" | "buildkit" | "auto"); full output to log_path.

    `platform` (linux/amd64, linux/arm64; None: the Engine's own) is what the image must be for: the
    build asks for it, and an image of any other architecture fails here, before anything can tag or
    push it (a classic builder may ignore the request and build for the host from a local base)."""
    backend = choose_backend(backend)
    if backend not in ("api", "buildkit", "podman"):
        raise UsageError(f"unknown builder {backend!r}", fix="use one of: auto, buildkit, api")
    if not os.path.isdir(context):
        raise BuildError(f"build context {context} is not a directory", fix="run `envbuild render` first")
    parent = os.path.dirname(os.path.abspath(log_path))
    os.makedirs(parent, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8", errors="replace", buffering=1) as log:
        log.write(f"# envbuild build: backend={backend} context={os.path.abspath(context)}\n")
        try:
            if backend == "api":
                image_id, steps = _build_api(context, log, log_path, no_cache, progress, labels, platform)
            elif backend == "podman":
                from envbuild.image.podmanbuild import build_podman

                engine = current_engine()
                image_id, steps = build_podman(
                    engine,  # type: ignore[arg-type]  # choose_backend: the podman backend is Podman's
                    context,
                    log,
                    log_path,
                    no_cache,
                    progress,
                    labels,
                    platform,
                )
            else:
                image_id, steps = _build_buildkit(
                    context, log, log_path, no_cache, progress, labels, platform
                )
            if platform is not None:
                check_platform(image_id, platform, log_path=log_path)
        except BaseException as exc:
            # the log ends with why it stopped, never mid-line without a word
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            log.write(f"\n# envbuild: build stopped: {redact(reason)}\n")
            raise
        finally:
            close = getattr(progress, "close", None)  # a Progress ends its redrawn line
            if callable(close):
                close()
        seconds = time.monotonic() - started
        log.write(f"# envbuild: built {image_id} in {seconds:.1f}s\n")
    return BuildResult(image_id=image_id, backend=backend, seconds=seconds, steps=steps)


def is_native(platform: str) -> bool:
    """Whether `platform` is this host's own (no emulation needed to run what is built for it)."""
    host = host_platform()
    return host is not None and host.name == normalize(platform)


def check_platform(image_id: str, platform: str, *, log_path: str | None = None) -> str:
    """The image's platform, when it is `platform`; else a BuildError with what it is and the fix.

    Asked of the Engine (the image config's os/architecture), never taken from the build's request:
    a builder that ignored --platform, or a base image of the wrong architecture, shows up here."""
    wanted = normalize(platform)
    try:
        attrs = current_engine().inspect_image(image_id)
    except EngineError as exc:
        attrs, why = None, exc.message
    else:
        why = "the Docker Engine no longer has it"
    if attrs is None:
        raise BuildError(
            f"cannot inspect the built image {image_id}: {why}",
            fix="check that dockerd is healthy (`docker info`) and build again",
        )
    found = platform_of(attrs)
    if found != wanted:
        where = f"; the build log is {log_path}" if log_path else ""
        raise BuildError(
            f"the build made an image for {describe(attrs)}, not {wanted} as the plan asks: it was not "
            f"tagged or pushed{where}",
            fix=f"build with BuildKit (--builder buildkit), which builds for --platform {wanted}, from a "
            f"base image that has a {wanted} variant (check --base-image: `docker image inspect` shows its "
            "Architecture)",
        )
    return found


def _build_api(
    context: str,
    log: IO[str],
    log_path: str,
    no_cache: bool,
    progress: Callable[[str], None] | None,
    labels: dict[str, str] | None,
    platform: str | None = None,
) -> tuple[str, int]:
    import docker.errors

    try:
        client = current_engine().api(timeout=None)  # the build stage bounds the stream, not a request
    except EngineError as exc:
        raise BuildError(
            f"cannot reach the Docker Engine: {exc.message}",
            fix="start dockerd, or set DOCKER_HOST to its socket",
        ) from exc
    output = ClassicOutput(progress)
    image_id: str | None = None
    stream: Any = None
    try:
        stream = client.build(
            path=context,
            decode=True,
            rm=True,
            forcerm=True,
            nocache=no_cache,
            pull=False,
            labels=labels,
            # the classic builder takes a platform from API 1.32; asked only for a foreign one, so a
            # native build sends what it always has
            **({"platform": platform} if platform and not is_native(platform) else {}),
        )
        for chunk in stream:
            text = redact(chunk.get("stream") or "")
            if text:
                log.write(text)
                output.feed(text)
            if "status" in chunk:
                log.write(redact(f"{chunk['status']} {chunk.get('progress', '')}".rstrip()) + "\n")
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message") or str(chunk)
                detail = redact(str(detail))
                log.write(f"ERROR: {detail}\n")
                raise output.failure(detail.strip(), log_path)
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
        output.flush()
        if image_id is None and output.short_id is not None:
            image_id = client.inspect_image(output.short_id)["Id"]
    except docker.errors.DockerException as exc:
        log.write(f"ERROR: {redact(str(exc))}\n")
        raise _failure(output.step, str(exc), log_path) from None
    finally:
        if stream is not None and hasattr(stream, "close"):
            stream.close()
        client.close()  # drops the connection: an interrupted build is cancelled by the Engine
    if image_id is None:
        raise _failure(output.step, "the Engine reported no image id", log_path)
    return image_id, output.steps


class ClassicOutput:
    """The classic builder's stream text, read as it comes: the step it is at ("Step 4/10 : RUN ..."),
    the steps seen, the short id of "Successfully built", and what each step printed (buildcause)."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.step: str | None = None  # "4/10: RUN ..." (step_name)
        self.number: str = ""  # the step's number: the key of its lines in `words`
        self.steps = 0
        self.short_id: str | None = None
        self.words = StepWords()
        self._pending = ""  # a line's start, until its end arrives

    def feed(self, text: str) -> None:
        """One chunk of the Engine's `stream` text. A chunk may hold part of a line (apt's "Building
        dependency tree..." arrives without its newline), and the RUN's stderr arrives in chunks of
        its own, wrapped in colour (ESC[91m ... ESC[0m), which may land inside a stdout line: a
        stderr chunk starts a line of its own."""
        # one stderr write may also come as several colour-wrapped chunks (`ESC[91mE ESC[0m` then
        # `ESC[91m: Unable to locate package ...`, seen in CI): joined back before the split
        text = (self._pending + text).replace(_STDERR_END + _STDERR_START, "")
        text = text[:1] + text[1:].replace(_STDERR_START, "\n" + _STDERR_START)
        *lines, self._pending = text.split("\n")
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        match = _API_STEP.match(line.strip())
        if match:
            number, total, instruction = match.groups()
            self.steps += 1
            self.number, self.step = number, step_name(number, total, instruction)
            if self.progress:
                self.progress(f"step {number}/{total}: {instruction}")
        elif line.startswith("Successfully built "):
            self.short_id = line.split()[-1]
        else:
            self.words.add(self.number, line)

    def flush(self) -> None:
        """The stream ended: its last line, if it had no newline, is a line too."""
        if self._pending:
            self._line(self._pending)
            self._pending = ""

    def failure(self, detail: str, log_path: str) -> BuildError:
        """The error for the Engine's error message `detail` (the step's `returned a non-zero code`)."""
        self.flush()
        return _failure(self.step, detail, log_path, self.words.causes(self.number))


def _build_buildkit(
    context: str,
    log: IO[str],
    log_path: str,
    no_cache: bool,
    progress: Callable[[str], None] | None,
    labels: dict[str, str] | None,
    platform: str | None = None,
) -> tuple[str, int]:
    cli = docker_cli()
    if not cli or not buildkit_available(cli):
        raise BuildError(
            f"the docker client ({cli or 'none found'}) cannot run BuildKit builds",
            fix="install docker-buildx, or use --builder api",
        )
    tmpdir = tempfile.mkdtemp(prefix="envbuild-iid-")
    iidfile = os.path.join(tmpdir, "iid")
    command = [cli, "build", "--progress=plain", "--iidfile", iidfile]
    if no_cache:
        command.append("--no-cache")
    if platform:
        command += ["--platform", platform]
    for key, value in (labels or {}).items():
        command += ["--label", f"{key}={value}"]
    command.append(context)
    log.write("$ " + " ".join(command) + "\n")
    output = BuildKitOutput(progress)
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise BuildError(f"cannot run {cli}: {exc}", fix="install docker.io, or use --builder api") from exc
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = redact(line)
            log.write(line)
            output.feed(line.rstrip("\n"))
        code = proc.wait()
        if code != 0:
            raise output.failure(code, log_path)
        with open(iidfile, encoding="utf-8") as handle:
            image_id = handle.read().strip()
        if not image_id.startswith("sha256:"):
            raise _failure(output.last_step, f"unexpected image id {image_id!r} in --iidfile", log_path)
        return image_id, len(output.seen)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


class BuildKitOutput:
    """`docker build --progress=plain` read line by line: each vertex's title, the steps seen, the
    vertex that failed, the builder's error lines, and what each step printed (buildcause)."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.titles: dict[str, str] = {}  # vertex "#7" -> its first line, e.g. "[ 4/10] RUN ..."
        self.seen: set[tuple[str, str]] = set()
        # vertices that printed ERROR and not DONE after it, in order: BuildKit 20.10 also prints
        # "#5 ERROR: <id> not found" for a cache record gone missing, then runs the step and goes on
        self.errored: dict[str, None] = {}
        self.last_step: str | None = None
        self.errors: deque[str] = deque(maxlen=15)
        self.tail: deque[str] = deque(maxlen=15)
        self.words = StepWords()

    def feed(self, line: str) -> None:
        """One line of the client's output, without its newline (and already redacted)."""
        self.tail.append(line)
        if _ERROR_WORD.search(line):
            self.errors.append(line)
        match = _BK_LINE.match(line)
        if not match:
            return
        vertex, rest = match.groups()
        if vertex not in self.titles:
            self.titles[vertex] = rest
            step = _BK_STEP.match(rest)
            if step:
                stage, n, m, instruction = step.groups()
                self.last_step = step_name(n, m, instruction)
                if (stage or "", n) not in self.seen:
                    self.seen.add((stage or "", n))
                    if self.progress:
                        text = f"[{stage}] {instruction}" if stage else instruction
                        self.progress(f"step {n}/{m}: {text}")
        elif rest.startswith("ERROR"):
            self.errored.pop(vertex, None)
            self.errored[vertex] = None  # the latest last
        elif rest.startswith(("DONE", "CACHED")):
            self.errored.pop(vertex, None)
        else:
            printed = buildkit_output(rest)
            if printed is not None:
                self.words.add(vertex, printed)

    @property
    def failed_vertex(self) -> str | None:
        """The vertex whose error stopped the build: the last to print ERROR without DONE after it."""
        return next(reversed(self.errored), None)

    def failure(self, code: int, log_path: str) -> BuildError:
        """The error for a client that exited `code`: the failed vertex's step and what it printed."""
        failed = self.failed_vertex
        if failed is not None:
            step_match = _BK_STEP.match(self.titles[failed])
            if step_match:
                _, n, m, instruction = step_match.groups()
                where: str | None = step_name(n, m, instruction)
            else:
                where = self.titles[failed]
        else:
            where = self.last_step
        detail = "\n".join(dict.fromkeys(self.errors or self.tail)) or f"exit status {code}"
        causes = self.words.causes(failed)
        return _failure(where, f"exit status {code}\n{detail}", log_path, causes)


class Progress:
    """A progress callback: one redrawn line on a TTY, plain "step n/m: text" lines (on change) in CI."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.last: str | None = None

    def __call__(self, line: str) -> None:
        head, sep, text = line.partition(": ")
        step, text = (head[5:], text) if sep and head.startswith("step ") else ("", line)
        if self.tty:
            prefix = f"\r[step {step}] " if step else "\r"
            suffix = f" ({time.monotonic() - self.started:.1f}s)"
            room = max(shutil.get_terminal_size().columns - len(prefix) - len(suffix), 8)
            cut = text if len(text) <= room else text[: room - 1] + "…"
            self.stream.write(prefix + cut + suffix + "\x1b[K")
        elif step != self.last or not step:
            self.stream.write(line + "\n")
        self.last = step
        self.stream.flush()

    def close(self) -> None:
        """End the redrawn line (TTY only)."""
        if self.tty and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()
