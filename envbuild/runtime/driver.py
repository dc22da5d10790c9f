"""Run one smoke step through a command-line runtime: identify, fetch, run, judge, clean up.

The steps are the runtime's (runtime.base); what is the same for all of them lives here once:

- the image is identified before anything is fetched: by digest from its registry (the image id a
  report names and `promote --to --report` checks, its platform, USER and ENV), or, for a plain name,
  from the local Docker Engine;
- the host must be able to run its platform (image.verify.check_runnable: QEMU, no GPU emulated);
- every step runs in its own process group with a time limit; a timeout, Ctrl-C or SIGTERM (which the
  CLI turns into KeyboardInterrupt) kills the whole group, so no container outlives the call;
- the scratch directory (run.workdir) and whatever the runtime's cleanup steps undo are removed in a
  `finally`, on success, failure, timeout and interrupt alike;
- the output is judged by image.verify.judge_output, as Docker's is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from envbuild._util.record import Record
from envbuild._util.signals import hold, release
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import VerifyError
from envbuild.image.platforms import host_platform
from envbuild.image.verify import (
    Verification,
    asked_checks,
    check_runnable,
    judge_output,
    smoke_timed_out,
    tail_lines,
)
from envbuild.matrix.platforms import normalize
from envbuild.oci.reference import parse_reference
from envbuild.preflight import smoke_environment
from envbuild.runtime.base import IMAGE_ENV_FILE, SMOKE_ENV_FILE, ContainerRuntime, SmokeRun, Step
from envbuild.smoke import DEFAULT_PRECISION, DEFAULT_STEPS, DEFAULT_TIMEOUT_S, smoke_command

# getting and unpacking an image of a few GB over a cluster's network takes minutes, not the smoke
# step's seconds; this bounds a hung pull, not a slow one
FETCH_TIMEOUT_S = 3600
# where runs unpack images: $ENVBUILD_RUNTIME_DIR (a node-local disk on a cluster), else $TMPDIR
WORKDIR_ENV = "ENVBUILD_RUNTIME_DIR"


def verify_with(
    runtime: ContainerRuntime,
    image: str,
    *,
    device: str = "gpu",
    steps: int = DEFAULT_STEPS,
    precision: str = DEFAULT_PRECISION,
    timeout: int = DEFAULT_TIMEOUT_S,
    env: dict[str, str] | None = None,
    imports: tuple[str, ...] | None = None,
    command: str | None = None,
) -> Verification:
    """Run the image's smoke program with `runtime`; nothing it unpacked outlives the call. imports /
    command: the checks to run instead of the image's own (image.verify.verify_image)."""
    if shutil.which(runtime.binary) is None:
        raise VerifyError(
            f"--runtime {runtime.name} needs `{runtime.binary}` on PATH, and this host has none",
            fix=runtime.install_fix,
        )
    found = identify(image)
    image_id, platform = found.image_id, found.platform
    run_how = check_runnable(image, platform, device) if platform else None
    workdir = tempfile.mkdtemp(prefix="envbuild-verify-", dir=os.environ.get(WORKDIR_ENV) or None)
    run = SmokeRun(
        image=image,
        image_id=image_id,
        platform=platform,
        device=device,
        argv=smoke_command(device, steps, precision, imports=imports, command=command),
        env=smoke_environment(device, env),
        user=found.user,
        workdir=workdir,
        local=found.local,
        image_env=found.env,
    )
    fetched: list[Step] = []
    try:
        with open(run.path(SMOKE_ENV_FILE), "w", encoding="utf-8") as handle:
            handle.write(runtime.env_file(run.env))
        if runtime.wants_image_env:
            with open(run.path(IMAGE_ENV_FILE), "w", encoding="utf-8") as handle:
                handle.write(image_env_lines(image, run.image_env))
        for item in runtime.fetch(run):
            fetched.append(item)
            code, stdout, stderr = run_step(item, FETCH_TIMEOUT_S)
            if code != 0:
                detail = tail_lines(stderr) or tail_lines(stdout)
                raise VerifyError(
                    f"{runtime.name} could not {item.what} (exit {code}): {detail or 'no output'}",
                    fix=f"run `{' '.join(item.argv)}` by hand to see why; check the registry is "
                    "reachable from this node and the credentials the runtime uses",
                )
        started = time.monotonic()
        smoke = runtime.execute(run)
        try:
            exit_code, stdout, stderr = run_step(smoke, timeout)
        except subprocess.TimeoutExpired:
            raise smoke_timed_out(timeout) from None
        seconds = round(time.monotonic() - started, 3)
    finally:
        for item in runtime.cleanup(run) if fetched else []:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                run_step(item, 300)
        remove_tree(workdir)
    return judge_output(
        stdout,
        stderr,
        exit_code,
        device=device,
        seconds=seconds,
        image_id=image_id,
        platform=platform,
        emulated=bool(run_how is not None and run_how.emulated),
        runtime=runtime.name,
        checks=asked_checks(imports, command),
    )


def remove_tree(path: str) -> None:
    """Delete an unpacked image, including the read-only directories images carry (a user's rmtree
    fails inside a 0555 directory; root's does not, so only a non-root run would leave a tree behind)."""

    def writable_then_retry(function, failed: str, _exc: BaseException) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
            function(failed)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable_then_retry)
    else:
        shutil.rmtree(
            path, onerror=lambda function, failed, info: writable_then_retry(function, failed, info[1])
        )


def run_step(item: Step, timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one step, run in a process group of its own that is killed
    whole on a timeout or an interrupt: runtimes fork helpers (squashfuse, the unpacked container's
    processes) that must not outlive envbuild. subprocess.TimeoutExpired after the kill."""
    env = {**os.environ, **item.env} if item.env else None
    mask = hold()  # a signal in the step's first milliseconds must not escape Popen() (signals.hold)
    try:
        process = subprocess.Popen(
            list(item.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env,
            start_new_session=True,
            preexec_fn=lambda: release(mask),
        )
    except BaseException:
        release(mask)
        raise
    try:
        release(mask)  # a signal held since hold() is raised here, where the group is killed
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:  # the timeout, KeyboardInterrupt (SIGINT/SIGTERM/SIGHUP), anything
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=10)
        raise
    return process.returncode, stdout, stderr


class Identity(Record):
    """What the driver knows of an image before fetching it. image_id: its config digest. platform:
    "linux/amd64", or None when the config names none. user: its USER as "uid:gid" numbers, or None.
    local: found in the local Docker Engine (a plain name), not by digest. env: its ENV entries
    ("KEY=VALUE", in the config's order), only the well-formed ones."""

    __slots__ = ("image_id", "platform", "user", "local", "env")
    image_id: str
    platform: str | None
    user: str | None
    local: bool
    env: tuple[str, ...]


def identify(image: str) -> Identity:
    """The Identity of `image`: REPO@sha256:... from its registry (the host's platform's image of an
    index), a plain name from the local Docker Engine."""
    parsed = parse_reference(image)
    if parsed.digest:
        from envbuild.oci.registry import image_config

        host = host_platform()
        image_id, config = image_config(image, platform=host.name if host else "linux/amd64")
        inner = config.get("config") or {}
        return Identity(
            image_id=image_id,
            platform=_platform(config),
            user=numeric_user(inner.get("User")),
            local=False,
            env=_env(inner.get("Env")),
        )
    return _local(image)


def _env(entries: object) -> tuple[str, ...]:
    """The config's Env list as given, keeping only strings of the KEY=VALUE form (the registry's
    document is untrusted: anything else is not an environment entry)."""
    if not isinstance(entries, list):
        return ()
    return tuple(item for item in entries if isinstance(item, str) and item.partition("=")[0] and "=" in item)


def image_env_lines(image: str, env: tuple[str, ...]) -> str:
    """IMAGE_ENV_FILE's text: one KEY=VALUE line per entry, in the config's order, as Docker sets them
    (and as ch-convert writes /ch/environment). A value holding a newline cannot be a line of it."""
    for item in env:
        if "\n" in item or "\0" in item:
            key = item.partition("=")[0]
            raise VerifyError(
                f"image {image!r} sets {key!r} to a value holding a newline (or NUL), which the runtime's "
                "environment file cannot carry",
                fix="set that variable without a newline in the image (its Dockerfile's ENV), or verify "
                "it with Docker",
            )
    return "".join(f"{item}\n" for item in env)


def _local(image: str) -> Identity:
    try:
        attrs = current_engine().inspect_image(image)
    except EngineError:
        raise VerifyError(
            f"image {image!r} is not pinned by digest, and no Docker Engine is reachable to find it",
            fix="pass REPO@sha256:<digest> (the digest its push reported): the runtime pulls it by digest",
        ) from None
    if attrs is None:
        raise VerifyError(
            f"image {image!r} is neither pinned by digest nor in the local Docker Engine",
            fix="pass REPO@sha256:<digest> (the digest its push reported): the runtime pulls it by digest",
        )
    config = {
        "os": attrs.get("Os"),
        "architecture": attrs.get("Architecture"),
        "variant": attrs.get("Variant"),
    }
    inner = attrs.get("Config") or {}
    return Identity(
        image_id=str(attrs["Id"]),
        platform=_platform(config),
        user=numeric_user(inner.get("User")),
        local=True,
        env=_env(inner.get("Env")),
    )


def _platform(config: dict) -> str | None:
    architecture = config.get("architecture")
    if not architecture:
        return None
    name = f"{config.get('os') or 'linux'}/{architecture}"
    with contextlib.suppress(Exception):
        return normalize(name)
    return None


def numeric_user(user: object) -> str | None:
    """The image's USER as "uid:gid" when it is numeric ("10001" or "10001:10001"), else None: runtimes
    that map users (Charliecloud's --uid/--gid) take numbers; a name would need the image's passwd."""
    if not isinstance(user, str) or not user:
        return None
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return None
    return f"{uid}:{gid or uid}"
