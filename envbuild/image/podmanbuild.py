"""The `podman` build backend: `podman build` (buildah) on the rendered context, unchanged.

buildah runs the templates' BuildKit-era instructions as they are (`RUN --mount=type=bind` of the uv
binary and the wheelhouse, multi-stage `COPY --from`), so a context renders the same for both
engines and Docker's goldens stay byte-identical. Its output differs from both Docker builders:
"STEP 3/19: RUN ..." ("[2/2] STEP 3/3: ..." in a multi-stage build), a RUN's output as plain lines,
and one closing line, `Error: building at STEP "RUN ...": while running runtime: exit status 100`.
PodmanOutput reads that into the same BuildError the Docker backends raise.

An interrupted build gets SIGTERM first and a few seconds to end, then SIGKILL: buildah removes the
working container of the step it was running when it is stopped, not when it is killed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild._util.signals import hold, release
from envbuild.engine.base import EngineError
from envbuild.errors import BuildError
from envbuild.image.buildcause import StepWords
from envbuild.image.buildfailure import build_failure as _failure
from envbuild.image.buildfailure import step_name

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

    from envbuild.engine.podman_engine import PodmanEngine

# "STEP 3/19: RUN ...", or "[2/2] STEP 3/3: COPY ..." in a multi-stage build
_STEP = re.compile(r"^(?:\[(\d+)/(\d+)\] )?STEP (\d+)/(\d+): (.*)$")
_ERROR = re.compile(r'^Error: building at STEP "(.*)": (.*?)(?:exit status (\d+))?$')
STOP_GRACE_S = 10  # how long a stopped `podman build` may take to clean up before it is killed


class PodmanOutput:
    """`podman build` output read line by line: the step it is at, the steps seen, what each step
    printed (buildcause) and the closing Error line."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.step: str | None = None  # "3/19: RUN ..." (step_name)
        self.key = ""  # the step's key in `words`: "stage/step"
        self.steps = 0
        self.error: str | None = None  # the Error line, without "Error: "
        self.code: str | None = None  # the failed step's exit status
        self.tail: list[str] = []
        self.words = StepWords()

    def feed(self, line: str) -> None:
        """One line of output, without its newline (already redacted)."""
        self.tail = [*self.tail[-14:], line]
        match = _STEP.match(line)
        if match:
            stage, stages, number, total, instruction = match.groups()
            self.steps += 1
            self.key = f"{stage or 1}/{number}"
            self.step = step_name(number, total, instruction)
            if self.progress:
                where = f"[stage {stage}/{stages}] " if stage else ""
                self.progress(f"step {number}/{total}: {where}{instruction}")
            return
        failed = _ERROR.match(line)
        if failed:
            self.error = line.removeprefix("Error: ")
            self.code = failed.group(3)
            return
        if line.startswith("Error: "):
            self.error = line.removeprefix("Error: ")
            return
        self.words.add(self.key, line)

    def failure(self, code: int, log_path: str) -> BuildError:
        detail = self.error or "\n".join(self.tail) or f"exit status {code}"
        step = self.step if self.steps else None
        codes = [self.code] if self.code else []
        return _failure(step, detail, log_path, self.words.causes(self.key), tool="podman build", codes=codes)


def build_podman(
    engine: PodmanEngine,
    context: str,
    log: IO[str],
    log_path: str,
    no_cache: bool,
    progress: Callable[[str], None] | None,
    labels: dict[str, str] | None,
    platform: str | None = None,
) -> tuple[str, int]:
    """Build `context` untagged with `podman build`; (image id, steps seen)."""
    try:
        command = engine.build_command()
    except EngineError as exc:
        raise BuildError(exc.message, fix=exc.fix or "install podman") from None
    tmpdir = tempfile.mkdtemp(prefix="envbuild-iid-")
    iidfile = os.path.join(tmpdir, "iid")
    # --layers: each step cached as its own image, as Docker's builders do (podman's own default,
    # but containers.conf can turn it off)
    command += ["build", "--layers", "--iidfile", iidfile]
    if no_cache:
        command.append("--no-cache")
    if platform:
        command += ["--platform", platform]
    for key, value in (labels or {}).items():
        command += ["--label", f"{key}={value}"]
    command.append(context)
    log.write("$ " + " ".join(command) + "\n")
    output = PodmanOutput(progress)
    cli = command[: command.index("build")]
    before = working_containers(cli)
    built = False
    mask = hold()  # a signal in the child's first milliseconds must not escape Popen() (signals.hold)
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            preexec_fn=lambda: release(mask),
        )
    except OSError as exc:
        release(mask)
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise BuildError(
            f"cannot run {command[0]}: {exc}", fix="install podman, or use --engine docker"
        ) from exc
    except BaseException:
        release(mask)
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    try:
        release(mask)  # a signal held since hold() is raised here, where the build is stopped
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
            raise _failure(
                output.step, f"unexpected image id {image_id!r} in --iidfile", log_path, tool="podman build"
            )
        built = True
        return image_id, output.steps
    finally:
        stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
        if not built and before is not None:
            left = remove_working_containers(cli, before)
            if left:
                log.write(f"# envbuild: removed {len(left)} working container(s) the stopped build left\n")


def stop(proc: subprocess.Popen[str]) -> None:
    """End `proc` if it still runs: SIGTERM, STOP_GRACE_S to clean up, then SIGKILL; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


QUERY_S = 30  # one `podman ps` or `podman rm` of the cleanup


def working_containers(cli: list[str]) -> set[str] | None:
    """The ids of buildah's working containers in this storage now (None: podman could not say)."""
    try:
        done = subprocess.run(
            [*cli, "ps", "--all", "--external", "--no-trunc", "--format", "{{.ID}} {{.State}}"],
            capture_output=True,
            text=True,
            timeout=QUERY_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    rows = [line.split() for line in done.stdout.lower().splitlines()]
    return {row[0] for row in rows if row[1:] == ["storage"]}


def remove_working_containers(cli: list[str], before: set[str]) -> list[str]:
    """Remove the working containers that appeared during a build that did not finish: a stopped
    `podman build` leaves the FROM's and each bind mount's (no process: storage only, but disk).
    Only those this storage did not have when the build started are touched; another build of the
    same user that started meanwhile could lose its own, which is why a finished build removes none."""
    now = working_containers(cli)
    new = sorted((now or set()) - before)
    if new:
        try:
            subprocess.run([*cli, "rm", "--force", *new], capture_output=True, timeout=QUERY_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return []
    return new
