"""The container engine envbuild builds, inspects, runs, tags and pushes images with.

Every stage that talks to an engine asks `current_engine()` for it, so where the engine is (a local
socket, DOCKER_HOST, a remote context, podman's service), how long each kind of request may wait,
and what "unreachable" looks like are decided here once, not at a dozen call sites.
`ContainerEngine` is the interface; `DockerEngine` and `PodmanEngine` its implementations, chosen by
name (`--engine`, ENVBUILD_ENGINE, envbuild.toml's [build] engine) with `engine_named`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from envbuild.engine.base import ContainerEngine
from envbuild.errors import UsageError
from envbuild.spec.model import ENGINES  # the names a team writes ([build] engine)

__all__ = [
    "ENGINES",
    "ContainerEngine",
    "close_engines",
    "current_engine",
    "engine_named",
    "select_engine",
    "selected",
    "use_engine",
]

_current: ContainerEngine | None = None


def current_engine() -> ContainerEngine:
    """The engine this process uses: the one `use_engine` set, else the Docker Engine the environment
    names (DOCKER_HOST, as the docker CLI reads it)."""
    global _current
    if _current is None:
        from envbuild.engine.docker_engine import DockerEngine

        _current = DockerEngine()
    return _current


def use_engine(engine: ContainerEngine | None) -> None:
    """Make `engine` the one every stage uses (None: back to the environment's Docker Engine)."""
    global _current
    _current = engine


def engine_named(name: str) -> ContainerEngine:
    """A new engine of kind `name` ("docker" | "podman"); a UsageError naming what is accepted else."""
    if name == "docker":
        from envbuild.engine.docker_engine import DockerEngine

        return DockerEngine()
    if name == "podman":
        from envbuild.engine.podman_engine import PodmanEngine

        return PodmanEngine()
    raise UsageError(f"unknown container engine {name!r}", fix=f"use one of: {', '.join(ENGINES)}")


_made: dict[str, ContainerEngine] = {}  # one engine of each kind per process: a podman service is reused


def select_engine(name: str) -> ContainerEngine:
    """Make the engine named `name` current: the current one when it is of that kind already (one a
    caller set with use_engine), else this process's engine of that kind, made on first use."""
    if _current is not None and _current.name == name:
        return _current
    if name not in _made:
        _made[name] = engine_named(name)
    use_engine(_made[name])
    return _made[name]


def close_engines() -> None:
    """Close every engine this process made and the current one (Podman: stop the API service it
    started); each starts again on its next request."""
    for engine in {id(e): e for e in (*_made.values(), *([_current] if _current else []))}.values():
        engine.close()


@contextlib.contextmanager
def selected(name: str) -> Iterator[ContainerEngine]:
    """select_engine(name) for the block, and the engine before it current again after it: one
    command's --engine never outlives the command (the tests run many in one process)."""
    previous = _current
    try:
        yield select_engine(name)
    finally:
        use_engine(previous)
