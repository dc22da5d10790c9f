"""`envbuild doctor --runtime NAME`: whether this host can run `verify --runtime NAME`.

On a Slurm node there is no Docker daemon; the smoke step runs through Apptainer, Enroot or
Charliecloud (envbuild.runtime). There the Engine checks would fail and mislead, so doctor checks the
runtime instead: its binary on PATH (the ContainerRuntime's `binary`, else its `install_fix`), its
version (the runtime's `version_argv`, within the doctor's deadline), the version floor where one
matters (`min_version`: Enroot 4.0 for digests), and, for a GPU run, what the runtime's GPU path
needs on the host. Each runtime module stays the one place that knows its command line; this module
only runs the version command and looks at the host.

What each GPU path needs, from the runtimes' own documentation:

- Apptainer `--nv` (https://apptainer.org/docs/user/main/gpu.html): the host's NVIDIA libraries,
  found with `nvidia-container-cli` when it is installed, else by the names in nvliblist.conf
  (https://github.com/apptainer/apptainer/blob/main/etc/nvliblist.conf) looked up in the ldconfig
  cache; `libcuda.so` is the one CUDA cannot do without.
- Enroot (https://github.com/NVIDIA/enroot/blob/master/doc/standard-hooks.md): the GPU comes from the
  hook `98-nvidia.sh` in `$ENROOT_SYSCONF_PATH/hooks.d` (default /etc/enroot, doc/configuration.md),
  installed by the enroot+caps package, which runs `nvidia-container-cli` (libnvidia-container-tools).
- Charliecloud `ch-fromhost --nvidia` (https://hpc.github.io/charliecloud/ch-fromhost.html, and
  /usr/bin/ch-fromhost itself): it injects what `nvidia-container-cli list --binaries --libraries`
  names, and stops with "nvidia-container-cli failed" without it; driver libraries in the ldconfig
  cache alone are not enough for it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from envbuild._util.deadline import Deadline, DeadlineExceeded
from envbuild._util.redact import redact
from envbuild.host.check import Check
from envbuild.runtime import RUNTIMES, runtime_named

VERSION_TIMEOUT_S = 10  # one version command, or one `ldconfig -p`
HPC_RUNTIMES = tuple(name for name in RUNTIMES if name != "docker")
# what to do when a runtime's check runs out of the doctor's time
SLOW_FIX = (
    "the runtime's version command hung: run it by hand; a binary on a hung shared filesystem "
    "(a module path, /cvmfs, NFS) does this"
)
ENROOT_SYSCONF_DEFAULT = "/etc/enroot"
ENROOT_NVIDIA_HOOK = "98-nvidia.sh"
_VERSION = re.compile(r"\b(\d+(?:\.\d+)+)\b")  # dotted: a bare number is more often a line number
_CPU_FIX = "or verify on the CPU: --smoke-device cpu (and doctor --no-gpu)"
_CONTAINER_CLI_FIX = (
    "install libnvidia-container-tools (it provides nvidia-container-cli; "
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)"
)


def parse_version(text: str) -> tuple[int, ...] | None:
    """The first dotted number in what a version command printed: "apptainer version 1.3.4" is
    (1, 3, 4), ch-run's "0.31" (0, 31), Enroot's "3.5.0" (3, 5, 0)."""
    found = _VERSION.search(text)
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def runtimes_on_path() -> list[tuple[str, str]]:
    """(runtime, binary) for each HPC runtime whose binary is on PATH: what a host without a Docker
    daemon can verify with."""
    found = []
    for name in HPC_RUNTIMES:
        binary = runtime_named(name).binary
        if shutil.which(binary):
            found.append((name, binary))
    return found


def other_runtimes_hint() -> str:
    """The tail of the "docker engine" fix on a host where the Engine cannot be reached: the runtimes
    this host does have, so a Slurm user learns what works there. Empty when there is none."""
    found = runtimes_on_path()
    if not found:
        return ""
    names = " or ".join(f"`--runtime {name}`" for name, _ in found)
    binaries = ", ".join(binary for _, binary in found)
    verb = "is" if len(found) == 1 else "are"
    return (
        f"; or, on a cluster node without a Docker daemon, use {names} ({binaries} {verb} on PATH): "
        f"envbuild doctor --runtime {found[0][0]}, envbuild verify REPO@sha256:... --runtime {found[0][0]}"
    )


def check_runtime(name: str, deadline: Deadline, *, gpu: bool = True) -> list[Check]:
    """The runtime's binary and version, then (with `gpu`) what its GPU path needs."""
    runtime = runtime_named(name)
    checks = [check_binary(name, deadline)]
    if gpu:
        if checks[0].status == "fail" and shutil.which(runtime.binary) is None:
            checks.append(Check(name=f"{name} GPU", status="skip", evidence=f"no {name} to run", fix=None))
        else:
            checks.append(GPU_CHECKS[name](deadline))
    return checks


def check_binary(name: str, deadline: Deadline) -> Check:
    """On PATH, answering its version command, at or above its version floor; the ok evidence says
    what the runtime cannot do that Docker does (its `limits`), as `verify` will."""
    runtime = runtime_named(name)
    path = shutil.which(runtime.binary)
    if path is None:
        return Check(
            name=name,
            status="fail",
            evidence=f"`{runtime.binary}` is not on PATH",
            fix=runtime.install_fix,
        )
    from envbuild.runtime.driver import run_step  # late: it brings image.verify, which plain doctor skips

    command = runtime.version_step()
    shown = " ".join(command.argv)
    timeout = deadline.budget(VERSION_TIMEOUT_S)
    try:  # run_step: in a process group of its own, killed whole on a timeout (a wrapper's children)
        code, stdout, stderr = run_step(command.replace(argv=(path, *command.argv[1:])), timeout)
    except subprocess.TimeoutExpired:
        if deadline.expired():
            raise DeadlineExceeded from None
        return Check(
            name=name,
            status="fail",
            evidence=f"`{shown}` did not answer within {timeout:g} s",
            fix=SLOW_FIX,
        )
    except OSError as exc:
        return Check(
            name=name,
            status="fail",
            evidence=f"{path} could not run: {exc}",
            fix=f"check that {path} is executable and whole; {runtime.install_fix}",
        )
    said = redact(" ".join(f"{stdout}\n{stderr}".split())[:200])
    version = parse_version(said) if code == 0 else None
    if version is None:
        return Check(
            name=name,
            status="fail",
            evidence=f"`{shown}` (at {path}) exited {code} without a version: {said or 'no output'}",
            fix=f"run `{shown}` by hand; {runtime.install_fix}",
        )
    shown_version = ".".join(map(str, version))
    floor = runtime.min_version
    if floor is not None and version < floor:
        wanted = ".".join(map(str, floor))
        return Check(
            name=name,
            status="fail",
            evidence=f"{runtime.binary} {shown_version} at {path}: `verify --runtime {name}` needs "
            f">= {wanted}: {runtime.min_version_why}",
            fix=f"upgrade to {name} >= {wanted}: {runtime.install_fix}",
        )
    limits = f"; unlike Docker it cannot: {'; '.join(runtime.limits)}" if runtime.limits else ""
    evidence = f"{runtime.binary} {shown_version} at {path}{limits}"
    return Check(name=name, status="ok", evidence=evidence, fix=None)


def ldconfig_libcuda(deadline: Deadline) -> str | None:
    """The path of libcuda.so.1 in the ldconfig cache (`ldconfig -p`), None when it lists none: where
    Apptainer's --nv looks for the driver's libraries when nvidia-container-cli is missing."""
    ldconfig = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None
    )
    if ldconfig is None:
        return None
    try:
        done = subprocess.run(
            [ldconfig, "-p"], capture_output=True, check=False, timeout=deadline.budget(VERSION_TIMEOUT_S)
        )
    except subprocess.TimeoutExpired:
        if deadline.expired():
            raise DeadlineExceeded from None
        return None
    except OSError:
        return None
    for line in done.stdout.decode("utf-8", errors="replace").splitlines():
        if line.strip().startswith("libcuda.so") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


def check_apptainer_gpu(deadline: Deadline) -> Check:
    """`apptainer exec --nv`: the driver's libraries, through nvidia-container-cli or ldconfig."""
    name = "apptainer GPU"
    cli = shutil.which("nvidia-container-cli")
    if cli:
        return Check(name=name, status="ok", evidence=f"--nv finds the NVIDIA libraries with {cli}", fix=None)
    libcuda = ldconfig_libcuda(deadline)
    if libcuda:
        return Check(
            name=name,
            status="ok",
            evidence=f"--nv finds the NVIDIA libraries in the ldconfig cache (nvliblist.conf): {libcuda}",
            fix=None,
        )
    return Check(
        name=name,
        status="fail",
        evidence="--nv has no NVIDIA libraries to bind: no nvidia-container-cli on PATH, and no libcuda.so "
        "in the ldconfig cache (ldconfig -p)",
        fix="run this on a GPU node with the NVIDIA driver installed (its libcuda.so in the ldconfig "
        f"cache), or {_CONTAINER_CLI_FIX}; {_CPU_FIX}",
    )


def check_enroot_gpu(deadline: Deadline) -> Check:
    """Enroot's GPU: its NVIDIA hook, and the nvidia-container-cli the hook runs."""
    name = "enroot GPU"
    sysconf = os.environ.get("ENROOT_SYSCONF_PATH") or ENROOT_SYSCONF_DEFAULT
    hook = os.path.join(sysconf, "hooks.d", ENROOT_NVIDIA_HOOK)
    cli = shutil.which("nvidia-container-cli")
    missing, fixes = [], []
    if not os.path.isfile(hook):
        missing.append(f"no NVIDIA hook {hook}")
        fixes.append(
            "install Enroot's hooks (the enroot+caps package puts 98-nvidia.sh in "
            f"{ENROOT_SYSCONF_DEFAULT}/hooks.d; ENROOT_SYSCONF_PATH moves it)"
        )
    if cli is None:
        missing.append("no nvidia-container-cli on PATH (the hook runs it)")
        fixes.append(_CONTAINER_CLI_FIX)
    if missing:
        return Check(name=name, status="fail", evidence="; ".join(missing), fix="; ".join([*fixes, _CPU_FIX]))
    return Check(name=name, status="ok", evidence=f"NVIDIA hook {hook}, {cli}", fix=None)


def check_charliecloud_gpu(deadline: Deadline) -> Check:
    """`ch-fromhost --nvidia`: it injects what nvidia-container-cli lists, and needs it."""
    name = "charliecloud GPU"
    cli = shutil.which("nvidia-container-cli")
    fromhost = shutil.which("ch-fromhost")
    missing = []
    if fromhost is None:
        missing.append("no ch-fromhost on PATH")
    if cli is None:
        missing.append("no nvidia-container-cli on PATH (`ch-fromhost --nvidia` runs it)")
    if missing:
        fix = [_CONTAINER_CLI_FIX] if cli is None else []
        if fromhost is None:
            fix.insert(0, "install ch-fromhost with Charliecloud (it comes with ch-run)")
        return Check(name=name, status="fail", evidence="; ".join(missing), fix="; ".join([*fix, _CPU_FIX]))
    return Check(name=name, status="ok", evidence=f"ch-fromhost --nvidia can use {cli}", fix=None)


GPU_CHECKS = {
    "apptainer": check_apptainer_gpu,
    "enroot": check_enroot_gpu,
    "charliecloud": check_charliecloud_gpu,
}
