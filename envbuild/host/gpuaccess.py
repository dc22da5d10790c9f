"""`envbuild doctor`: how this host hands GPUs to containers, and which path a GPU smoke step takes.

Two paths exist (envbuild.engine.cdi): CDI specs (/etc/cdi, /var/run/cdi), which the NVIDIA Container
Toolkit writes by default since 1.18 and Podman needs, and the toolkit's legacy runtime hook, which
Docker's `--gpus` device request uses. doctor lists the specs and the devices they name, says whether
the legacy hook is installed, and which path `verify --gpu-access auto` would take here.
"""

from __future__ import annotations

import shutil

from envbuild.engine import current_engine
from envbuild.engine.cdi import ALL_GPUS, GENERATE_FIX, GPU_KIND, find_specs, gpu_devices, gpu_path, spec_dirs
from envbuild.host.check import Check

LEGACY_HOOKS = ("nvidia-container-runtime-hook", "nvidia-container-toolkit")  # the hook's two names


def check_gpu_access() -> list[Check]:
    specs = find_specs()
    checks = []
    where = " and ".join(spec_dirs())
    unreadable = [spec for spec in specs if spec.problem]
    for spec in unreadable:
        checks.append(
            Check(
                name="CDI spec",
                status="warn",
                evidence=f"{spec.path} {spec.problem}",
                fix=f"regenerate it: {GENERATE_FIX}",
            )
        )
    readable = [spec for spec in specs if not spec.problem]
    devices = gpu_devices(readable)
    if readable:
        listed = "; ".join(
            f"{spec.path}: {spec.kind} ({', '.join(spec.devices[:8]) or 'no devices'}"
            + (f" and {len(spec.devices) - 8} more" if len(spec.devices) > 8 else "")
            + ")"
            for spec in readable
        )
        status = "ok" if "all" in devices else "warn"
        checks.append(
            Check(
                name="CDI specs",
                status=status,
                evidence=listed,
                fix=None if status == "ok" else f"no spec names {ALL_GPUS}: {GENERATE_FIX}",
            )
        )
    else:
        checks.append(
            Check(
                name="CDI specs",
                status="warn",
                evidence=f"no CDI spec in {where}: Podman and Docker's CDI mode cannot reach a GPU here",
                fix=GENERATE_FIX,
            )
        )
    hook = next((shutil.which(name) for name in LEGACY_HOOKS if shutil.which(name)), None)
    checks.append(
        Check(
            name="legacy toolkit hook",
            status="ok" if hook else "warn",
            evidence=f"{hook} (Docker's --gpus device request)"
            if hook
            else f"none of {', '.join(LEGACY_HOOKS)}",
            fix=None
            if hook
            else "install nvidia-container-toolkit for Docker's --gpus, or use CDI (--gpu-access cdi)",
        )
    )
    engine = current_engine()
    path = gpu_path("auto", readable)
    why = f"a spec names {ALL_GPUS}" if path == "cdi" else f"no spec names {GPU_KIND}=all"
    if path not in engine.gpu_paths:  # Podman: CDI or nothing
        checks.append(
            Check(
                name="GPU path",
                status="fail",
                evidence=f"{engine.title} reaches GPUs only through CDI, and {why}",
                fix=GENERATE_FIX,
            )
        )
        return checks
    ready = path == "cdi" or hook
    checks.append(
        Check(
            name="GPU path",
            status="ok" if ready else "warn",
            evidence=f"verify --gpu-access auto would use {path} ({why})",
            fix=None if ready else f"neither path is ready: {GENERATE_FIX}",
        )
    )
    return checks
