"""`envbuild smoke`: run a framework's smoke program on this host, outside any container.

The same program files that go into images, run with this interpreter: useful on a GPU login
node before building anything, and how the tests exercise the programs on CPU. The user's checks
(--import, --command) run after the training step as they do in an image, in the program's scratch
directory, so a check must not depend on the directory it starts in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from envbuild._util.signals import hold, release
from envbuild.errors import EnvbuildError, UsageError
from envbuild.smoke import DEFAULT_TIMEOUT_S, FRAMEWORKS, program_files
from envbuild.smoke.report import parse_report, redact_checks, validate, without_progress


def detect_framework() -> str:
    import importlib.util

    for name in FRAMEWORKS:
        if importlib.util.find_spec(name) is not None:
            return name
    raise UsageError(
        "none of torch, tensorflow or jax is importable by this Python",
        fix="install one, or pass --framework and run with the Python that has it",
    )


def run_smoke(
    framework: str | None,
    *,
    device: str,
    steps: int | None = None,
    precision: str | None = None,
    timeout: int = DEFAULT_TIMEOUT_S,
    python: str | None = None,
    imports: tuple[str, ...] = (),
    command: str | None = None,
) -> tuple[dict, int]:
    framework = framework or detect_framework()
    if framework not in FRAMEWORKS:
        raise UsageError(
            f"--framework {framework!r} has no smoke program", fix=f"use one of: {', '.join(FRAMEWORKS)}"
        )
    argv = ["--device", device]
    if steps is not None:
        argv += ["--steps", str(steps)]
    if precision is not None:
        argv += ["--precision", precision]
    argv += [f"--import={name}" for name in imports]
    if command is not None:
        argv += [f"--command={command}"]
    with tempfile.TemporaryDirectory(prefix="envbuild-smoke-") as workdir:
        for name, data in program_files(framework).items():
            with open(os.path.join(workdir, name), "wb") as handle:
                handle.write(data)
        path = os.path.join(workdir, "smoke.py")
        try:
            done = _run_reaped([python or sys.executable, path, *argv], timeout=timeout, cwd=workdir)
        except subprocess.TimeoutExpired:
            raise EnvbuildError(
                f"the {framework} smoke program did not finish within {timeout}s",
                fix="a hang in the first steps usually means a driver or NCCL problem: "
                "run nvidia-smi, then retry with NCCL_DEBUG=INFO",
            ) from None
    report = parse_report(done.stdout)
    if report is None:
        tail = (without_progress(done.stderr) or done.stdout).strip().splitlines()[-5:]
        raise EnvbuildError(
            f"the {framework} smoke program printed no JSON report (exit {done.returncode})",
            fix="its last output was: " + " | ".join(tail) if tail else None,
        )
    problems = validate(report)
    if problems:
        raise EnvbuildError(
            "the smoke report does not match envbuild/smoke/schema.json: " + "; ".join(problems[:5])
        )
    redact_checks(report)
    return report, done.returncode


def _run_reaped(argv: list[str], *, timeout: float, cwd: str) -> subprocess.CompletedProcess[str]:
    """subprocess.run, but a signal that interrupts it (SIGTERM/SIGHUP arrive as KeyboardInterrupt)
    kills the program and waits for it: subprocess.run waits only 0.25 s after a KeyboardInterrupt, so
    on a loaded host envbuild could exit first and leave the killed program to init, unreaped."""
    pipe = subprocess.PIPE
    mask = hold()  # a signal in the child's first milliseconds must not escape Popen() (signals.hold)
    try:
        process = subprocess.Popen(
            argv, stdout=pipe, stderr=pipe, text=True, cwd=cwd, preexec_fn=lambda: release(mask)
        )
    except BaseException:
        release(mask)
        raise
    with process:
        try:
            release(mask)  # a signal held since hold() is raised here, where the child is killed
            out, err = process.communicate(timeout=timeout)
        except BaseException:
            process.kill()
            process.wait()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def summary(report: dict) -> str:
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = [
        f"{report['framework']} {report['framework_version']} on {report['device_used']} "
        f"(Python {report['python']}, CUDA {report['cuda_runtime'] or '-'}, precision "
        f"{report.get('precision_effective') or report['precision']}): {verdict}"
    ]
    for gate, state in report["gates"].items():
        lines.append(f"  {gate:<10} {state}")
    if report.get("losses"):
        lines.append(
            f"  loss {report.get('loss_first')} -> {report.get('loss_last')} over {report['steps']} steps"
            + (
                f", {report['throughput_samples_per_s']} samples/s"
                if report.get("throughput_samples_per_s")
                else ""
            )
        )
    for check in report.get("checks") or []:
        version = f" {check['version']}" if check.get("version") else ""
        verdict = "passed" if check["passed"] else "FAILED"
        lines.append(f"  check {check['kind']} {check['name']}{version}: {verdict} ({check['seconds']}s)")
    if report.get("preflight"):  # the image's guard on this node: the line a job log keeps
        lines.append(f"  {report['preflight']['summary']}")
    for failure in report["failed"]:
        lines.append(f"  FAILED {failure['gate']}: {failure['detail']}")
        lines.append(f"    hint: {failure['hint']}")
    # verify's: the image's platform, whether QEMU ran it, and the runtime when not Docker (the
    # default): a Slurm job's log then says which of Apptainer, Enroot or Charliecloud ran the step
    runtime = report.get("runtime")
    named = f", {runtime}" if runtime and runtime != "docker" else ""
    if report.get("image_platform"):
        how = "emulated (QEMU), CPU only" if report.get("emulated") else "native"
        lines.append(f"  platform {report['image_platform']} ({how}{named})")
    elif named:
        lines.append(f"  runtime {runtime}")
    for note in report.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"
