"""Which platform an image is for, and whether this host can run it: natively, through QEMU, or not.

An image built for linux/arm64 on an x86_64 host runs only when the kernel hands aarch64 binaries to
QEMU (binfmt_misc with the qemu-aarch64 handler enabled, from Debian's qemu-user-static and
binfmt-support). Without it the container dies with "exec format error" and no report, which says
nothing about the cause; so build and verify ask here first and refuse with the fix instead.
Emulation runs the CPU smoke step only: no GPU driver is reachable from an emulated process.

The docker SDK is imported inside the function that reads an image, so importing this costs nothing.
"""

from __future__ import annotations

import os
import platform as _host

from envbuild._util.record import Record
from envbuild.errors import BuildError
from envbuild.matrix.platforms import Platform, by_machine, normalize

BINFMT_DIR = "/proc/sys/fs/binfmt_misc"
# where binfmt_misc is read from instead, e.g. a host's /proc mounted elsewhere; tests point it at a
# directory of their own to stand for a host without (or with a disabled) QEMU handler
BINFMT_ENV = "ENVBUILD_BINFMT_DIR"
# the binfmt_misc handler names qemu-user-static registers, per `uname -m`
QEMU_HANDLERS = {"aarch64": "qemu-aarch64", "x86_64": "qemu-x86_64"}


class Runnable(Record):
    """How this host runs an image of `platform`: `emulated` through `handler` (a binfmt_misc entry)
    or natively; `reason` and `fix` say why not when `ok` is false."""

    __slots__ = ("platform", "host", "ok", "emulated", "handler", "reason", "fix")
    platform: str  # the image's, canonical
    host: str  # this host's machine (uname -m)
    ok: bool
    emulated: bool
    handler: str | None
    reason: str | None
    fix: str | None


def host_machine() -> str:
    """`uname -m` of this host: x86_64, aarch64."""
    return _host.machine()


def host_platform() -> Platform | None:
    """This host's platform, or None for a machine envbuild builds no images for."""
    return by_machine(host_machine())


def default_binfmt_dir() -> str:
    """Where binfmt_misc's handlers are read: $ENVBUILD_BINFMT_DIR, else /proc/sys/fs/binfmt_misc."""
    return os.environ.get(BINFMT_ENV) or BINFMT_DIR


def handler_enabled(machine: str, binfmt_dir: str | None = None) -> str | None:
    """The enabled binfmt_misc entry that runs `machine` binaries here (its path), else None."""
    directory = binfmt_dir or default_binfmt_dir()
    name = QEMU_HANDLERS.get(machine)
    if name is None:
        return None
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().strip()
    except OSError:
        return None
    return path if first == "enabled" else None


def runnable(image_platform: str, *, machine: str | None = None, binfmt: str | None = None) -> Runnable:
    """Whether a container of `image_platform` runs on this host (`machine`: uname -m, default this
    host's; `binfmt`: the binfmt_misc directory, default default_binfmt_dir()), and how."""
    binfmt = binfmt or default_binfmt_dir()
    name = normalize(image_platform)
    wanted = by_machine(name.split("/")[1])
    assert wanted is not None  # normalize accepted it, so the table has it
    machine = machine or host_machine()
    if machine in (wanted.machine, wanted.architecture):
        return Runnable(
            platform=name, host=machine, ok=True, emulated=False, handler=None, reason=None, fix=None
        )
    handler = handler_enabled(wanted.machine, binfmt)
    if handler is not None:
        return Runnable(
            platform=name, host=machine, ok=True, emulated=True, handler=handler, reason=None, fix=None
        )
    return Runnable(
        platform=name,
        host=machine,
        ok=False,
        emulated=False,
        handler=None,
        reason=(
            f"the image is {name} and this host is {machine}, with no QEMU handler for "
            f"{wanted.machine} ({os.path.join(binfmt, QEMU_HANDLERS.get(wanted.machine, '?'))} "
            "is missing or disabled)"
        ),
        fix=(
            f"run it on a {name} host; or, for the CPU smoke step only, install qemu-user-static and "
            "binfmt-support (apt-get install qemu-user-static binfmt-support; mount -t binfmt_misc "
            f"binfmt_misc {BINFMT_DIR}; update-binfmts --enable {QEMU_HANDLERS.get(wanted.machine)})"
        ),
    )


def require_buildable(platform: str, smoke_device: str) -> Runnable:
    """How this host runs `platform`'s build steps and smoke step; a BuildError before anything is
    built when it cannot (no QEMU handler: every RUN step would die with "exec format error"), or
    when the smoke step is on the GPU and would have to run emulated."""
    run = runnable(platform)
    if not run.ok:
        raise BuildError(f"cannot build for {run.platform} on this host: {run.reason}", fix=run.fix)
    if run.emulated and smoke_device == "gpu":
        raise BuildError(
            f"the smoke step is on the GPU, and a {run.platform} image runs on this {run.host} host only "
            "under QEMU emulation, which reaches no GPU: nothing was built",
            fix=f"build and verify on a {run.platform} GPU host; or build here with --smoke-device cpu "
            f"(emulated, slow) and run `envbuild verify IMAGE --smoke-device gpu` on a {run.platform} "
            "GPU host",
        )
    return run


def platform_of(attrs: dict) -> str | None:
    """The canonical platform of an image from its inspect attributes (Os, Architecture), or None
    when it names one envbuild does not know."""
    os_name = str(attrs.get("Os") or "linux")
    arch = str(attrs.get("Architecture") or "")
    found = by_machine(arch)
    if os_name != "linux" or found is None:
        return None
    return found.name


def describe(attrs: dict) -> str:
    """What an image's inspect attributes say it is for, as a person reads it: linux/arm64."""
    variant = f"/{attrs['Variant']}" if attrs.get("Variant") else ""
    return f"{attrs.get('Os') or '?'}/{attrs.get('Architecture') or '?'}{variant}"
