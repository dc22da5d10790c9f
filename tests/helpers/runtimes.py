"""A command-line runtime made of real shell and Python commands, and a registry serving one image
with a chosen config, to test runtime.driver's contract without Apptainer, Enroot or Charliecloud:
what the driver does around a runtime's steps (scratch directory, smoke.env, timeouts, cleanup) is
the same for all of them."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from envbuild.runtime.base import ContainerRuntime, SmokeRun, Step, step
from tests.helpers.paths import FIXTURES
from tests.helpers.registry import MANIFEST_V2, LoopbackServer, RegistryHandler, layerless_image

REPORTS = FIXTURES / "smoke"
Argvs = Callable[[SmokeRun], list[tuple[str, ...]]]


def print_report(name: str, exit_code: int = 0) -> tuple[str, ...]:
    """A real process that prints a captured smoke report (tests/fixtures/smoke) as the smoke
    program does, on one line, and exits `exit_code`."""
    code = "import json, sys; print(json.dumps(json.load(open(sys.argv[1])))); sys.exit(int(sys.argv[2]))"
    return (sys.executable, "-c", code, str(REPORTS / name), str(exit_code))


def sh(script: str, *args: str) -> tuple[str, ...]:
    return ("sh", "-c", script, "sh", *args)


class ScriptedRuntime(ContainerRuntime):
    """A runtime whose steps are the argvs the test gives, each built from the SmokeRun."""

    name = "scripted"
    binary = "sh"
    install_fix = "a POSIX sh, or pick another --runtime"

    def __init__(self, fetch: Argvs, execute: Callable[[SmokeRun], tuple[str, ...]], cleanup: Argvs) -> None:
        self._fetch, self._execute, self._cleanup = fetch, execute, cleanup

    def fetch(self, run: SmokeRun) -> list[Step]:
        return [step(f"fetch step {n}", *argv) for n, argv in enumerate(self._fetch(run), 1)]

    def execute(self, run: SmokeRun) -> Step:
        return step("run the smoke step", *self._execute(run))

    def cleanup(self, run: SmokeRun) -> list[Step]:
        return [step("clean up", *argv) for argv in self._cleanup(run)]


class ConfigRegistry(LoopbackServer):
    """An anonymous plain-HTTP registry on loopback holding one layerless image, x/y@`digest`, whose
    config document is `config`: what the driver's identify() reads (image id, platform, USER)."""

    def __init__(self, config: dict) -> None:
        self.manifest, self.digest, self.config, self.config_digest = layerless_image(config)
        outer = self

        class Handler(RegistryHandler):
            def answer(self) -> None:
                path = self.path.partition("?")[0]
                if path == "/v2/":
                    return self.reply(200, b"{}")
                if path == f"/v2/x/y/manifests/{outer.digest}":
                    return self.reply(200, outer.manifest, digest=outer.digest, media_type=MANIFEST_V2)
                if path == f"/v2/x/y/blobs/{outer.config_digest}":
                    return self.reply(200, outer.config, digest=outer.config_digest)
                self.reply(404, b'{"errors": [{"code": "MANIFEST_UNKNOWN"}]}')

            do_GET = do_HEAD = answer

        super().__init__(Handler)

    @property
    def ref(self) -> str:
        return f"{self.host}/x/y@{self.digest}"


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    """Whether `pid` stops running within `seconds`: SIGKILL is delivered at once, but the kernel
    tears a process down asynchronously. Bounds a wait; asserts nothing about how long it took."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def entries(directory: str | os.PathLike[str]) -> list[str]:
    return sorted(os.listdir(directory))
