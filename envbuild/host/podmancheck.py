"""`envbuild doctor --engine podman`: Podman in place of the Docker Engine, its toolkit and BuildKit.

What a Podman host needs differs from a Docker one: no daemon to start (envbuild starts podman's API
service itself when podman.socket is not listening), no NVIDIA runtime (GPUs come as CDI devices; the
"GPU access" step checks their specs), and `podman build` instead of BuildKit. What it reports is what
the issue asks of it: the version, rootless or rootful, and where the API came from.
"""

from __future__ import annotations

from envbuild._util.deadline import Deadline, DeadlineExceeded
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.engine.podman_engine import NO_PODMAN_FIX, PodmanEngine, podman_cli
from envbuild.host.check import Check


def check_podman(deadline: Deadline, *, gpu: bool = True) -> list[Check]:
    """Podman's API answers (its version, rootless or rootful, the socket); with `gpu`, that it needs
    no NVIDIA runtime; without, that `podman build` is there to build with."""
    engine = current_engine()
    assert isinstance(engine, PodmanEngine)
    cli = podman_cli()
    if not cli:
        return [
            Check(name="podman", status="fail", evidence="podman is not on PATH", fix=NO_PODMAN_FIX),
        ]
    try:
        facts = engine.info()
    except EngineError as exc:
        if deadline.expired():
            raise DeadlineExceeded from None
        return [Check(name="podman", status="fail", evidence=f"not reachable: {exc.message}", fix=exc.fix)]
    mode = {True: "rootless", False: "rootful", None: "rootless or rootful: not said"}[facts["rootless"]]
    started = " (a service envbuild started for this run)" if engine.started_service else ""
    checks = [
        Check(
            name="podman",
            status="ok",
            evidence=f"Podman {facts['version']}, {mode}, API at {engine.base_url}{started}",
            fix=None,
        )
    ]
    if gpu:
        checks.append(
            Check(
                name="nvidia runtime",
                status="skip",
                evidence="Podman needs none: GPUs come as the CDI device nvidia.com/gpu=all (GPU access)",
                fix=None,
            )
        )
    else:
        checks.append(Check(name="podman build", status="ok", evidence=f"{cli} build (buildah)", fix=None))
    return checks
