"""`envbuild doctor`: the field's host checklist, and whether this host can run a lock or an image.

Order of operations from the field: visibility first (nvidia-smi), then the stack (driver against the
matrix, the container toolkit, the Engine), then what is happening on the GPUs (memory held by other
processes, heat, slowdowns). Every check that is not ok says how to fix it.

The doctor is run when a host misbehaves, and a misbehaving host hangs rather than fails: a wedged
driver makes nvidia-smi hang, a stuck dockerd accepts connections and never answers. So the whole run
has one deadline (`--timeout`, default 60 s) that every wait draws on; when it passes, the check in
progress and every check after it are reported as failed, with a fix, and the doctor ends.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

from envbuild._util.deadline import Deadline, DeadlineExceeded
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.engine import current_engine
from envbuild.errors import EnvbuildError, UsageError
from envbuild.host.check import Check
from envbuild.host.gpuaccess import check_gpu_access
from envbuild.host.imageguard import preflight_check
from envbuild.host.nvsmi import SmiReport, SmiUnavailable, query, reason_names
from envbuild.host.runtimecheck import HPC_RUNTIMES, SLOW_FIX, check_runtime, other_runtimes_hint
from envbuild.image.platforms import describe, host_machine, platform_of
from envbuild.lockfile.read import load_lock
from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.lifecycle import base_image_warning, today
from envbuild.matrix.model import Gpu, Matrix, find_gpu
from envbuild.matrix.platforms import accepted, by_machine
from envbuild.matrix.support import capability_gpu, first_driver, unsupported
from envbuild.matrix.versions import Driver, format_driver, format_minor, parse_driver, parse_minor
from envbuild.oci.labels import COMPAT, CUDA, GPU_ARCH
from envbuild.oci.reference import parse_reference
from envbuild.resolve.solver import native_cuda_of
from envbuild.smoke.programs.smoke_common import require_satisfied
from envbuild.spec.model import LOCK_NAME

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HOT_C = 85
BUSY_MIB = 1024  # memory held by other processes worth a warning
DEFAULT_TIMEOUT_S = 60.0  # the whole doctor run
ENGINE_TIMEOUT_S = 10  # one Engine API request, or one nvidia-container-cli call


def _driver(smi: SmiReport | None) -> Driver | None:
    if smi is None or not smi.driver_version:
        return None
    try:
        return parse_driver(smi.driver_version)
    except EnvbuildError:
        return None


def check_smi(smi: SmiReport | None, problem: str | None, fix: str | None = None) -> list[Check]:
    if smi is None:
        fix = fix or (
            "install the NVIDIA driver, or run this on a GPU node; inside a container, start it with "
            "--gpus all"
            if "not found" in (problem or "")
            else "the driver is installed but not answering: reboot or reload the kernel module "
            "(a driver upgrade without reboot does this), and check `dmesg | grep -i nvrm`"
        )
        return [
            Check(name="nvidia-smi", status="fail", evidence=problem or "nvidia-smi did not answer", fix=fix)
        ]
    if smi.driver_version is None and not smi.gpus:
        return [
            Check(
                name="nvidia-smi",
                status="fail",
                evidence="nvidia-smi answered, but named no driver version and no GPU",
                fix="run `nvidia-smi` by hand and compare it with a working node: a stub or a broken "
                "install answers like this; reinstall the driver",
            )
        ]
    names = ", ".join(sorted({g.name for g in smi.gpus})) or "no GPUs listed"
    evidence = (
        f"driver {smi.driver_version}, CUDA {smi.cuda_version or '?'}, {len(smi.gpus)} GPU(s): {names}"
        f" (from the {smi.source})"
    )
    return [Check(name="nvidia-smi", status="ok", evidence=evidence, fix=None)]


def check_driver(matrix: Matrix, smi: SmiReport | None) -> Check:
    driver = _driver(smi)
    if driver is None:
        return Check(
            name="driver vs matrix", status="skip", evidence="no driver version to compare", fix=None
        )
    native = native_cuda_of(matrix, driver)
    if native is None:
        return Check(
            name="driver vs matrix",
            status="fail",
            evidence=f"driver {driver} runs no CUDA 11+ toolkit envbuild knows",
            fix="install a current data-center driver (R535 or newer)",
        )
    added = []
    for major, row in sorted(matrix.minor_compat.items()):
        newer = [m for m in matrix.minors_of_major(major) if m > native]
        if newer and driver.at_least(row.min_driver):
            added.append(f"CUDA {format_minor(newer[0])}-{format_minor(newer[-1])}")
    extra = f"; --compat minor adds {', '.join(added)} (without PTX JIT of newer code)" if added else ""
    return Check(
        name="driver vs matrix",
        status="ok",
        evidence=f"driver {driver} runs CUDA <= {format_minor(native)} natively{extra}",
        fix=None,
    )


def add_row_fix(name: str, cc: tuple[int, int] | None) -> str:
    """How to make the catalogue know a GPU nvidia-smi named: its own row, checked, in a matrix copy."""
    capability = f'compute_capability = "{format_minor(cc)}"' if cc else "compute_capability"
    stopgap = f"; until then name it by capability: --gpu {format_minor(cc)}" if cc else ""
    return (
        f"add a [[gpu]] row for {name!r} to a copy of matrix/gpus.toml (name, {capability}, "
        "architecture, first_cuda, segment, source from https://developer.nvidia.com/cuda-gpus), "
        f"run `envbuild matrix check --matrix DIR` and pass --matrix DIR{stopgap}"
    )


def check_gpu_support(matrix: Matrix, smi: SmiReport | None) -> Check:
    """Every GPU nvidia-smi lists against its first and last driver branch (the rule resolve uses).

    A GPU is found by name (the name normaliser: "NVIDIA A100-SXM4-80GB" is the A100 row). One the
    catalogue lacks is judged by the compute capability nvidia-smi's `compute_cap` reported, as
    `--gpu X.Y` would be, and said to be unknown with how to add its row: a warning, not a failure,
    because an unknown name is the catalogue's gap, not the host's. Without a capability (old drivers
    lack `compute_cap`) it is left out rather than guessed.
    """
    name = "driver vs GPUs"
    driver = _driver(smi)
    if smi is None or driver is None or not smi.gpus:
        return Check(name=name, status="skip", evidence="no driver version or GPU to compare", fix=None)
    found: dict[str, tuple[Gpu, list[str]]] = {}
    unknown: dict[str, tuple[tuple[int, int] | None, bool]] = {}  # name -> (capability, judged by it)
    for gpu in smi.gpus:
        row = find_gpu(matrix, gpu.name)
        if row is None:
            cc = gpu.compute_capability
            row = capability_gpu(matrix, cc) if cc else None
            unknown[gpu.name] = (cc, row is not None)
        if row is not None:
            found.setdefault(gpu.name, (row, []))[1].append(str(gpu.index))
    notes = [_unknown_note(smi_name, cc, judged) for smi_name, (cc, judged) in unknown.items()]
    add_rows = "; ".join(add_row_fix(smi_name, cc) for smi_name, (cc, _) in unknown.items())
    misses = [
        (f"GPU {', '.join(indices)} ({smi_name})", miss)
        for smi_name, (row, indices) in found.items()
        if (miss := unsupported(matrix, row, driver)) is not None
    ]
    if misses:
        return Check(
            name=name,
            status="fail",
            evidence="; ".join([*(f"{where}: {miss.text}" for where, miss in misses), *notes]),
            fix="; ".join(
                [*dict.fromkeys(miss.fix for _, miss in misses), *([add_rows] if add_rows else [])]
            ),
        )
    if not found:
        return Check(name=name, status="warn", evidence="; ".join(notes), fix=add_rows)
    spans = []
    for smi_name, (row, _) in found.items():
        floor = first_driver(matrix, row)
        span = [f"R{floor.branch} or later"] if floor and floor.branch else []
        span += [f"R{row.max_driver_branch} at most"] if row.max_driver_branch else []
        label = f"compute capability {format_minor(row.cc)}" if smi_name in unknown else row.name
        spans.append(f"{smi_name} ({label}: {', '.join(span) or 'any driver the matrix knows'})")
    evidence = f"driver {driver} drives {'; '.join(spans)}"
    if unknown:
        return Check(name=name, status="warn", evidence="; ".join([evidence, *notes]), fix=add_rows)
    return Check(name=name, status="ok", evidence=evidence, fix=None)


def _unknown_note(name: str, cc: tuple[int, int] | None, judged: bool) -> str:
    if judged and cc:
        return f"{name} is not in the GPU catalogue: judged by its compute capability {format_minor(cc)}"
    if cc:
        return (
            f"{name} is not in the GPU catalogue, and no GPU in it has compute capability "
            f"{format_minor(cc)}: not judged"
        )
    return f"{name} is not in the GPU catalogue and nvidia-smi reported no compute capability: not judged"


def with_capabilities(matrix: Matrix, smi: SmiReport | None) -> SmiReport | None:
    """The banner has no compute capability column: fill it in from the matrix by GPU name."""

    if smi is None or all(g.compute_capability for g in smi.gpus):
        return smi
    gpus = []
    for gpu in smi.gpus:
        cc = gpu.compute_capability
        if cc is None:
            known = find_gpu(matrix, gpu.name)
            cc = known.cc if known else None
        gpus.append(gpu.replace(compute_capability=cc))
    return smi.replace(gpus=tuple(gpus))


def check_gpus(smi: SmiReport | None) -> list[Check]:
    if smi is None:
        return [Check(name="GPUs", status="skip", evidence="nvidia-smi did not answer", fix=None)]
    checks = []
    for gpu in smi.gpus:
        name = f"GPU {gpu.index}"
        if gpu.memory_total_mib is None:
            memory = "memory unknown"
        elif gpu.memory_used_mib is None:
            memory = f"{gpu.memory_total_mib} MiB total, use not reported"
        else:
            memory = f"{gpu.memory_used_mib}/{gpu.memory_total_mib} MiB used"
        cc = (
            f" (compute capability {gpu.compute_capability[0]}.{gpu.compute_capability[1]})"
            if gpu.compute_capability
            else ""
        )
        basics = f"{gpu.name}{cc}, {memory}" + (
            f", {gpu.temperature_c}C" if gpu.temperature_c is not None else ""
        )
        held = sum(p.used_mib for p in gpu.processes)
        slowdowns, info = reason_names(gpu.event_reasons)
        problems: list[tuple[str, str]] = []
        if gpu.processes and (held >= BUSY_MIB or (gpu.memory_used_mib or 0) >= BUSY_MIB):
            who = ", ".join(f"pid {p.pid} {p.name} {p.used_mib} MiB" for p in gpu.processes[:4])
            problems.append(
                (
                    f"other processes hold GPU memory: {who}",
                    "stop them or pick another GPU (CUDA_VISIBLE_DEVICES): a job sharing this GPU "
                    "can run out of memory",
                )
            )
        if gpu.temperature_c is not None and gpu.temperature_c >= HOT_C:
            problems.append(("running hot", "sustained heat throttles clocks: check airflow and cooling"))
        if slowdowns:
            problems.append(
                (
                    f"slowed down: {', '.join(slowdowns)}",
                    "thermal or power slowdown: check cooling and power delivery "
                    "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER)",
                )
            )
        if problems:
            checks.append(
                Check(
                    name=name,
                    status="warn",
                    evidence=f"{basics}; " + "; ".join(p[0] for p in problems),
                    fix="; ".join(p[1] for p in problems),
                )
            )
        else:
            note = f"; {', '.join(info)} active" if info else ""
            checks.append(Check(name=name, status="ok", evidence=basics + note, fix=None))
    return checks or [
        Check(
            name="GPUs",
            status="warn",
            evidence="nvidia-smi lists no GPU",
            fix="check the GPU is seated and visible (lspci | grep -i nvidia)",
        )
    ]


def check_host_platform(machine: str | None = None) -> Check:
    """The platform images for this host are built for: `[stack] platform` must name it, or the
    image will not run here (or only under emulation, which reaches no GPU)."""
    machine = machine or host_machine()
    found = by_machine(machine)
    if found is None:
        return Check(
            name="host platform",
            status="warn",
            evidence=f"{machine}: envbuild builds images for {accepted()} only",
            fix="build and run envbuild images on an x86_64 or an arm64 (aarch64) host",
        )
    return Check(name="host platform", status="ok", evidence=f"{found.name} ({machine})", fix=None)


def image_platform_check(ref: str, attrs: dict[str, Any], machine: str | None = None) -> Check:
    """Whether the image is for this host's platform: a container of another architecture either
    fails with "exec format error" or runs under QEMU, which is no GPU path."""
    machine = machine or host_machine()
    host = by_machine(machine)
    found = platform_of(attrs)
    name = f"image {ref} platform"
    if host is not None and found == host.name:
        return Check(name=name, status="ok", evidence=f"{found}, this host's", fix=None)
    here = host.name if host else machine
    return Check(
        name=name,
        status="fail",
        evidence=f"the image is {describe(attrs)} and this host is {here} ({machine}): its GPU "
        "workloads cannot run here (emulation, where binfmt offers it, reaches no GPU)",
        fix=f'build it for this host: `[stack] platform = "{here}"` in envbuild.toml (a list builds '
        f"several), then `envbuild build`; or run it on a {describe(attrs)} host",
    )


def _engine(deadline: Deadline):  # -> docker.DockerClient, imported late: resolve never pays for it
    """An Engine client whose requests each wait ENGINE_TIMEOUT_S, or what is left of the deadline."""
    return current_engine().client(timeout=deadline.budget(ENGINE_TIMEOUT_S))  # asks the API version


def _ask(client, deadline: Deadline, request: Callable[[], Any]) -> Any:
    client.api.timeout = deadline.budget(ENGINE_TIMEOUT_S)
    return request()


# the docker SDK's URLs for the Engine socket ("http+docker://localhost/v1.41/images/x/json"), with the
# "for" or "for url:" that leads into them: internal plumbing, not something a user can act on
_SDK_URL = re.compile(r"(?i)(?:\s+for(?:\s+url:?)?)?\s+http\+(?:docker|unix)://\S+")


def engine_reason(exc: BaseException) -> str:
    """The first line of what the docker SDK said, without its http+docker:// URLs: the Engine's own
    explanation when it gave one ("No such image: x:latest")."""
    from envbuild._util.redact import redact

    text = str(getattr(exc, "explanation", None) or exc)
    text = _SDK_URL.sub("", text).strip()
    return redact((text.splitlines() or [type(exc).__name__])[0][:200]) or type(exc).__name__


def check_docker(deadline: Deadline | None = None, *, gpu: bool = True) -> list[Check]:
    """The Engine: reachable and its version; with `gpu`, also its NVIDIA runtime and the toolkit."""
    deadline = deadline or Deadline(math.inf)
    try:
        client = _engine(deadline)
        version = _ask(client, deadline, client.version)
        info = _ask(client, deadline, client.info) if gpu else {}
    except DeadlineExceeded:
        raise
    except Exception as exc:  # the SDK raises DockerException, requests errors, FileNotFoundError...
        if deadline.expired():  # the request timed out on what was left of the deadline
            raise DeadlineExceeded from None
        unreachable = Check(
            name="docker engine",
            status="fail",
            evidence=f"not reachable: {engine_reason(exc)}",
            fix="start dockerd (systemctl start docker), check DOCKER_HOST, and that this user may use "
            "the socket (the docker group)" + other_runtimes_hint(),
        )
        if not gpu:
            return [unreachable]
        return [
            unreachable,
            Check(name="nvidia runtime", status="skip", evidence="no engine to ask", fix=None),
        ]
    checks = [
        Check(
            name="docker engine",
            status="ok",
            evidence=f"Docker {version.get('Version')} (API {version.get('ApiVersion')})",
            fix=None,
        )
    ]
    if not gpu:
        return checks
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    cdi = [
        d.get("ID", "") for d in info.get("DiscoveredDevices") or [] if "nvidia.com/gpu" in d.get("ID", "")
    ]
    if "nvidia" in runtimes or cdi:
        how = "nvidia runtime" if "nvidia" in runtimes else "CDI devices " + ", ".join(cdi[:3])
        checks.append(
            Check(
                name="nvidia runtime",
                status="ok",
                evidence=f"{how} configured (runtimes: {', '.join(runtimes)})",
                fix=None,
            )
        )
    else:
        checks.append(
            Check(
                name="nvidia runtime",
                status="fail",
                evidence="no NVIDIA runtime or CDI devices configured "
                f"(runtimes: {', '.join(runtimes) or '-'})",
                fix="install the NVIDIA Container Toolkit, run `nvidia-ctk runtime configure "
                "--runtime=docker` and restart dockerd; on CPU-only CI use --smoke-device cpu",
            )
        )
    cli = shutil.which("nvidia-container-cli")
    if cli:
        checks.append(_check_container_cli(cli, deadline))
    else:
        checks.append(
            Check(
                name="container toolkit",
                status="fail" if checks[-1].status == "fail" else "warn",
                evidence="nvidia-container-cli not found",
                fix="install nvidia-container-toolkit (it provides nvidia-container-cli and nvidia-ctk)",
            )
        )
    return checks


def check_buildkit() -> Check:
    """Whether `envbuild build` can use BuildKit (the backend `--builder auto` picks when it can): a
    docker client that runs BuildKit builds (envbuild.image.builder.buildkit_available)."""
    from envbuild.image.builder import buildkit_available, docker_cli

    cli = docker_cli()
    if cli and buildkit_available(cli):
        return Check(name="buildkit", status="ok", evidence=f"{cli} runs BuildKit builds", fix=None)
    return Check(
        name="buildkit",
        status="warn",
        evidence=f"the docker client ({cli or 'none found'}) cannot run BuildKit builds; `envbuild build` "
        "falls back to the Engine's classic builder",
        fix="install the docker client with buildx (docker-buildx / docker-buildx-plugin), or set "
        "DOCKER_CLI to one; --builder api builds without it",
    )


def check_registry(host: str, deadline: Deadline) -> Check:
    """The login for `host` from the docker config, tried against the registry as `docker login` does."""
    from envbuild.oci.registry import check_login

    name = f"registry {host}"
    try:
        evidence = check_login(host, timeout=deadline.budget(ENGINE_TIMEOUT_S), retries=0)
    except EnvbuildError as exc:
        if deadline.expired():
            raise DeadlineExceeded from None
        return Check(name=name, status="fail", evidence=exc.message, fix=exc.fix)
    return Check(name=name, status="ok", evidence=evidence, fix=None)


def _check_container_cli(cli: str, deadline: Deadline) -> Check:
    timeout = deadline.budget(ENGINE_TIMEOUT_S)
    try:
        done = subprocess.run([cli, "--version"], capture_output=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        if deadline.expired():
            raise DeadlineExceeded from None
        return Check(
            name="container toolkit",
            status="warn",
            evidence=f"nvidia-container-cli --version did not answer within {timeout:g} s",
            fix="run `nvidia-container-cli --version` by hand; reinstall nvidia-container-toolkit",
        )
    except OSError as exc:
        return Check(
            name="container toolkit",
            status="warn",
            evidence=f"nvidia-container-cli could not run: {exc}",
            fix="reinstall nvidia-container-toolkit, and check the file is executable",
        )
    said = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip().splitlines()
    return Check(
        name="container toolkit",
        status="ok",
        evidence=said[0] if said else "nvidia-container-cli present",
        fix=None,
    )


# ---------------------------------------------------------------------------------------------
# can this host run a given stack


def stack_verdict(
    matrix: Matrix,
    smi: SmiReport | None,
    *,
    name: str,
    cuda: str,
    compat: str,
    arch: str | None,
    requirement: str | None,
    disabled: bool = False,
) -> list[Check]:
    driver = _driver(smi)
    if driver is None:
        return [Check(name=name, status="skip", evidence="no driver visible to compare against", fix=None)]
    cuda_minor = parse_minor(cuda)
    floor_row = matrix.ga_floor.get(cuda_minor)
    compat_row = matrix.minor_compat.get(cuda_minor[0])
    native = bool(floor_row and floor_row.min_driver and driver.at_least(floor_row.min_driver))
    via_compat = bool(compat_row and driver.at_least(compat_row.min_driver))
    floor = format_driver(floor_row.min_driver) if floor_row and floor_row.min_driver else "unknown"
    host = f"this host has {driver} (CUDA {smi.cuda_version or '?'})"
    checks = []
    starts = True
    refused = ""
    if requirement and not disabled and smi and smi.cuda_version:
        ok, unmet = require_satisfied(requirement, smi.cuda_version, smi.driver_version, smi.brand)
        if not ok:
            starts = False
            refused = (
                f"; the image's NVIDIA_REQUIRE_CUDA ({requirement}) makes the container toolkit refuse "
                f"to start it (first unmet: {unmet})"
            )
    if native and starts:
        checks.append(
            Check(
                name=name,
                status="ok",
                evidence=f"runs natively: CUDA {cuda} needs driver >= {floor}; {host}",
                fix=None,
            )
        )
    elif via_compat and compat == "minor" and starts:
        checks.append(
            Check(
                name=name,
                status="ok",
                evidence=f"runs via minor-version compatibility (no PTX JIT of newer code): CUDA "
                f"{cuda} needs >= {format_driver(compat_row.min_driver)} this way; {host}",
                fix=None,
            )
        )
    else:
        native_cuda = native_cuda_of(matrix, driver)
        alternatives = (
            f"or relock for this driver: `envbuild resolve --driver {driver}` gives stacks for "
            f"CUDA <= {format_minor(native_cuda)}"
            if native_cuda
            else ""
        )
        if via_compat:
            alternatives += (
                f'; compat = "minor" would run CUDA {cuda_minor[0]}.x on >= '
                f"{format_driver(compat_row.min_driver)}"
            )
        checks.append(
            Check(
                name=name,
                status="fail",
                evidence=f"will not start natively: CUDA {cuda} needs driver >= {floor}; {host}{refused}",
                fix=f"upgrade the driver to >= {floor} (R{floor.split('.')[0]} or newer), " + alternatives,
            )
        )
    gpu_checks = _arch_checks(smi, name, arch, allow_ptx=native)
    return checks + gpu_checks


def _arch_checks(smi: SmiReport | None, name: str, arch: str | None, *, allow_ptx: bool) -> list[Check]:
    if not arch or smi is None:
        return []
    arch_list = parse_arch_list(arch)
    checks = []
    for gpu in smi.gpus:
        cc = gpu.compute_capability
        if cc is None:
            continue
        if arch_list.covers(cc, allow_ptx=allow_ptx):
            continue
        checks.append(
            Check(
                name=f"{name} GPU {gpu.index}",
                status="fail",
                evidence=f"no kernel image is available for execution on the device: {gpu.name} "
                f"(compute capability {cc[0]}.{cc[1]}) is not in the build's archs {arch}",
                fix=f"pick a build that lists {cc[0]}.{cc[1]}: envbuild resolve --gpu {cc[0]}.{cc[1]}",
            )
        )
    if not checks and any(g.compute_capability for g in smi.gpus):
        checks.append(
            Check(
                name=f"{name} GPUs",
                status="ok",
                evidence=f"every GPU is covered by the build's archs {arch}",
                fix=None,
            )
        )
    return checks


def lock_checks(matrix: Matrix, smi: SmiReport | None, path: str) -> list[Check]:
    from envbuild.plan.strategy import strategy_for

    lock, _ = load_lock(path)
    checks = []
    day = today()
    for target in lock.targets:
        warning = base_image_warning(matrix, target.base_image, day)
        if warning:
            checks.append(
                Check(
                    name=f"lock {target.name} base image",
                    status="warn",
                    evidence=warning.message,
                    fix=warning.fix,
                )
            )
        stack = dict(target.stack)
        compat = stack.get("compat", "native")
        cuda = stack.get("cuda")
        if cuda is None:  # the reader takes a [target.stack] without it: a lock is untrusted input
            checks.append(
                Check(
                    name=f"lock {target.name}",
                    status="fail",
                    evidence=f"{path}: target {target.name!r} records no cuda in [target.stack], so no "
                    "driver can be judged against it",
                    fix="run `envbuild lock` to write it again, and commit envbuild.lock",
                )
            )
            continue
        requirement = None
        if strategy_for(target.strategy).sets_require_cuda:  # what render writes into the image
            requirement = f"cuda>={cuda}" if compat == "native" else f"cuda>={cuda.split('.')[0]}.0"
        checks += stack_verdict(
            matrix,
            smi,
            name=f"lock {target.name}",
            cuda=cuda,
            compat=compat,
            arch=stack.get("arch"),
            requirement=requirement,
        )
    return checks


def image_checks(
    matrix: Matrix, smi: SmiReport | None, ref: str, deadline: Deadline | None = None
) -> list[Check]:
    deadline = deadline or Deadline(math.inf)
    try:
        client = _engine(deadline)
        image = _ask(client, deadline, lambda: client.images.get(ref))
    except DeadlineExceeded:
        raise
    except Exception as exc:
        if deadline.expired():
            raise DeadlineExceeded from None
        return [
            Check(
                name=f"image {ref}",
                status="fail",
                evidence=f"cannot inspect it: {engine_reason(exc)}",
                fix="pull it first (docker pull), or check the reference",
            )
        ]
    platform = image_platform_check(ref, image.attrs)
    if platform.status != "ok":  # the CUDA verdict below is moot for an image that cannot run here
        return [platform]
    config: dict[str, Any] = image.attrs.get("Config") or {}
    labels = config.get("Labels") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    cuda = labels.get(CUDA)
    requirement = (
        " ".join(
            v
            for k, v in sorted(env.items())
            if k.startswith("NVIDIA_REQUIRE_") and k != "NVIDIA_REQUIRE_JETPACK"
        )
        or None
    )
    disabled = env.get("NVIDIA_DISABLE_REQUIRE", "").lower() in ("1", "t", "true", "yes")
    if cuda is None:
        version = env.get("CUDA_VERSION")
        if not version:
            return [
                platform,
                Check(
                    name=f"image {ref}",
                    status="skip",
                    evidence=f"no {CUDA} label or CUDA_VERSION: not a CUDA image envbuild can judge",
                    fix=None,
                ),
            ]
        cuda = ".".join(version.split(".")[:2])
    verdict = stack_verdict(
        matrix,
        smi,
        name=f"image {ref}",
        cuda=cuda,
        compat=labels.get(COMPAT, "native"),
        arch=labels.get(GPU_ARCH),
        requirement=requirement,
        disabled=disabled,
    )
    guard = preflight_check(matrix, smi, ref, labels)  # what the image's own guard would decide here
    return [platform, *verdict, *([guard] if guard else [])]


def attestation_checks(image: str, summarize: Callable[[str], str | None] | None = None) -> list[Check]:
    """The image's attestations in one line (envbuild.attest.summary), under its image checks.

    Informational: doctor judges whether this host can run the image, so nothing here fails it. A
    registry that cannot be reached, or any other error while reading, is one "could not be read"
    note (status skip); no line (a local image) is no check at all. `summarize`: what makes the line
    (default attestation_line), so a caller can put its own reader in.
    """
    name = f"image {image} attestations"
    try:
        if summarize is None:
            from envbuild.attest.summary import attestation_line as summarize
        line = summarize(image)
    except DeadlineExceeded:
        raise
    except Exception as exc:  # doctor must never fail, or show a traceback, because of this line
        reason = exc.message if isinstance(exc, EnvbuildError) else f"{type(exc).__name__}: {exc}"
        reason = redact(" ".join(str(reason).split()))
        if len(reason) > 300:
            reason = reason[:297] + "..."
        note = f"attestations: could not be read: {reason}"
        return [Check(name=name, status="skip", evidence=note, fix=None)]
    if line is None:
        return []
    if "checks failed" in line:  # attest.check.summary_line's wording for a failed judgement
        return [
            Check(name=name, status="warn", evidence=line, fix=f"see every check: envbuild attest {image}")
        ]
    return [Check(name=name, status="ok", evidence=line, fix=None)]


def check_inputs(
    *,
    timeout: float,
    lock: str | None,
    image: str | None = None,
    registries: tuple[str, ...] = (),
    runtime: str = "docker",
) -> None:
    """Refuse bad flags before any check runs: a usage error should not wait out a slow host."""
    if runtime != "docker" and runtime not in HPC_RUNTIMES:
        raise UsageError(
            f"--runtime {runtime!r} is not a runtime envbuild runs",
            fix=f"pick one of docker, {', '.join(HPC_RUNTIMES)}",
        )
    if runtime != "docker" and image is not None:
        raise UsageError(
            f"--image reads the image from the local Docker Engine, which --runtime {runtime} does not use",
            fix=f"drop --image and run the image's smoke step instead: envbuild verify REPO@sha256:... "
            f"--runtime {runtime}; or judge a stack with --lock envbuild.lock",
        )
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(
            f"--timeout {timeout:g} is not a positive number of seconds",
            fix=f"give the whole run a finite time in seconds, e.g. --timeout {DEFAULT_TIMEOUT_S:g} "
            "(the default)",
        )
    if lock is not None and os.path.isdir(lock):
        raise UsageError(
            f"--lock {lock} is a directory; it takes the envbuild.lock file",
            fix=f"pass the lock file itself: --lock {os.path.join(lock, LOCK_NAME)}",
        )
    if lock is not None and _is_spec(lock):
        raise UsageError(
            f"--lock {lock} is an envbuild spec (envbuild.toml), not a lock: --lock takes the "
            f"{LOCK_NAME} that `envbuild lock` writes from it",
            fix=f"run `envbuild lock -f {lock}` and pass --lock "
            f"{os.path.join(os.path.dirname(lock), LOCK_NAME)}",
        )
    if image is not None:
        try:
            parse_reference(image)
        except UsageError as exc:
            raise UsageError(
                f"--image {image!r} is not an image reference: {exc.message}",
                fix="give NAME[:TAG][@sha256:DIGEST] of an image in this Engine, e.g. "
                "--image ghcr.io/acme/train:v1 (lowercase name, no spaces)",
            ) from None
    for host in registries:
        if not REGISTRY_HOST_RE.fullmatch(host):
            raise UsageError(
                f"--registry {host!r} is not a registry host",
                fix="give the registry as HOST[:PORT], as `docker login` takes it: e.g. --registry ghcr.io, "
                "--registry 123456789012.dkr.ecr.us-east-1.amazonaws.com, --registry 127.0.0.1:5000",
            )


REGISTRY_HOST_RE = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?"
)


def _is_spec(path: str) -> bool:
    """Whether `path` reads as a spec (its [stack], [packages], [image] or [smoke] tables, no
    lock-version): a lock's reader would call it malformed, which hides the real mistake."""
    from envbuild._util import limits, toml
    from envbuild._util.files import NotReadable, read_regular

    try:
        data = toml.loads(read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8"))
    except (OSError, UnicodeDecodeError, toml.TOMLDecodeError, NotReadable):
        return False
    return "lock-version" not in data and any(key in data for key in ("stack", "packages", "image", "smoke"))


# What to do when a step runs out of time: the usual reason it hangs, then the way around it.
_SLOW = {
    "nvidia-smi": "nvidia-smi hangs when the driver is wedged: run `nvidia-smi` by hand, check "
    "`dmesg | grep -i -e nvrm -e xid`, and reboot or reload the kernel module if it hangs there too",
    "docker engine": "dockerd accepted the connection but did not answer: check `systemctl status "
    "docker` and `docker info` by hand",
}


_ENGINE_SLOW = "the Engine did not answer in time: check `docker info` by hand"


def _timed_out(name: str, deadline: Deadline) -> Check:
    why = SLOW_FIX if name in HPC_RUNTIMES else _SLOW.get(name, _ENGINE_SLOW)
    return Check(
        name=name,
        status="fail",
        evidence=f"did not finish within the doctor's {deadline.seconds:g} s deadline (--timeout)",
        fix=f"{why}; or allow longer: --timeout SECONDS",
    )


def _not_run(name: str, deadline: Deadline, culprit: str | None) -> Check:
    used = f" (the {culprit} check used it)" if culprit else ""
    slow = f"fix what makes the {culprit} check slow, or " if culprit else ""
    return Check(
        name=name,
        status="fail",
        evidence=f"not run: the {deadline.seconds:g} s deadline had passed{used}",
        fix=f"{slow}allow longer: --timeout SECONDS",
    )


def run_doctor(
    matrix: Matrix,
    *,
    lock: str | None = None,
    image: str | None = None,
    nvidia_smi: str = "nvidia-smi",
    timeout: float = DEFAULT_TIMEOUT_S,
    gpu: bool = True,
    registries: tuple[str, ...] = (),
    attestations: Callable[[str], str | None] | None = None,
    runtime: str = "docker",
    bundle: str | None = None,
    spec: str = "envbuild.toml",
) -> list[Check]:
    """Every check, in the field's order, within one deadline of `timeout` seconds.

    `gpu=False` (--no-gpu, for CPU CI runners) runs no nvidia-smi and no NVIDIA runtime check: the
    Engine, BuildKit, and the login to each of `registries`. `attestations`: what makes the image's
    attestation line (attestation_checks). `runtime` (--runtime) other than docker: that runtime's
    checks (host.runtimecheck) take the place of the Engine, NVIDIA runtime, toolkit and BuildKit
    ones, for a Slurm node that verifies with it and has no Docker daemon. `bundle` (--bundle): the
    bundle `envbuild vendor` wrote, judged offline against `lock`, else the envbuild.lock beside
    `spec` (host.bundlecheck)."""
    check_inputs(timeout=timeout, lock=lock, image=image, registries=registries, runtime=runtime)
    subject = None
    if bundle is not None:
        from envbuild.host.bundlecheck import bundle_subject

        subject = bundle_subject(bundle, lock=lock, spec=spec)
    deadline = Deadline(timeout)
    found: dict[str, SmiReport | None] = {"smi": None}

    def host() -> list[Check]:
        smi, problem, fix = None, None, None
        try:
            smi = query(nvidia_smi, deadline=deadline)
        except SmiUnavailable as exc:
            problem, fix = str(exc), exc.fix
        except OSError as exc:
            problem = f"nvidia-smi could not run: {exc}"
        smi = found["smi"] = with_capabilities(matrix, smi)
        return [
            *check_smi(smi, problem, fix),
            check_driver(matrix, smi),
            check_gpu_support(matrix, smi),
            *check_gpus(smi),
        ]

    steps: list[tuple[str, Callable[[], list[Check]]]] = [
        ("host platform", lambda: [check_host_platform()]),
        ("nvidia-smi", host),
        ("docker engine", lambda: check_docker(deadline)),
        ("GPU access", check_gpu_access),
    ]
    if not gpu:
        steps = [
            ("host platform", lambda: [check_host_platform()]),
            ("docker engine", lambda: check_docker(deadline, gpu=False)),
            ("buildkit", lambda: [check_buildkit()]),
        ]
    if current_engine().name == "podman":  # Podman's own checks stand where the Engine's and BuildKit's do
        from envbuild.host.podmancheck import check_podman

        steps = [step for step in steps if step[0] != "buildkit"]
        steps = [
            ("podman", lambda: check_podman(deadline, gpu=gpu)) if name == "docker engine" else (name, step)
            for name, step in steps
        ]
    if runtime != "docker":
        steps = [step for step in steps if step[0] not in ("docker engine", "podman", "buildkit")]
        steps.append((runtime, lambda: check_runtime(runtime, deadline, gpu=gpu)))
    for registry in registries:
        steps.append((f"registry {registry}", lambda registry=registry: [check_registry(registry, deadline)]))
    if lock:
        steps.append((f"lock {lock}", lambda: lock_checks(matrix, found["smi"], lock)))
    if image:
        steps.append((f"image {image}", lambda: image_checks(matrix, found["smi"], image, deadline)))
        steps.append((f"image {image} attestations", lambda: attestation_checks(image, attestations)))
    if subject is not None:
        from envbuild.host.bundlecheck import bundle_checks

        steps.append((f"bundle {bundle}", lambda: bundle_checks(subject)))
    checks: list[Check] = []
    for number, (name, step) in enumerate(steps):
        if deadline.expired():  # the last step ended on the deadline: nothing more may start
            culprit = steps[number - 1][0] if number else None
            checks += [_not_run(later, deadline, culprit) for later, _ in steps[number:]]
            break
        try:
            checks += step()
        except DeadlineExceeded:
            checks.append(_timed_out(name, deadline))
            checks += [_not_run(later, deadline, name) for later, _ in steps[number + 1 :]]
            break
    return checks


_COLOURS = {"ok": "\033[32m", "warn": "\033[33m", "fail": "\033[31m", "skip": "\033[2m"}


# the widest the name column gets: a longer name (an image reference, `image REPO@sha256:... attestations`)
# is printed whole on a line of its own, and its evidence starts on the next, in the column, so one long
# name does not push every check's evidence 120 characters to the right
NAME_COLUMN = 32


def to_text(checks: list[Check], *, colour: bool | None = None) -> str:
    colour = os.isatty(1) and not os.environ.get("NO_COLOR") if colour is None else colour
    width = min(max(len(c.name) for c in checks), NAME_COLUMN)
    under = " " * (len("[fail] ") + width) + "  "  # where the evidence and the fix start
    lines = []
    for check in checks:
        status = f"{check.status:>4}"
        if colour:
            status = f"{_COLOURS[check.status]}{status}\033[0m"
        if len(check.name) > width:
            lines += [f"[{status}] {check.name}", f"{under}{check.evidence}"]
        else:
            lines.append(f"[{status}] {check.name.ljust(width)}  {check.evidence}")
        if check.fix:
            lines.append(f"{under}fix: {check.fix}")
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    lines.append(f"{failed} failed, {warned} warning(s), {len(checks)} checks")
    return "\n".join(lines) + "\n"


def to_json(checks: list[Check]) -> str:
    import json

    return json.dumps(
        {
            "ok": not any(c.status == "fail" for c in checks),
            "checks": [
                {"name": c.name, "status": c.status, "evidence": c.evidence, "fix": c.fix} for c in checks
            ],
        },
        indent=2,
    )
