"""The container engine envbuild builds, inspects, runs, tags and pushes images with.

Every stage that talks to an engine asks `current_engine()` for it, so where the engine is (a local
socket, DOCKER_HOST, a remote context), how long each kind of request may wait, and what "unreachable"
looks like are decided here once, not at a dozen call sites. `ContainerEngine` is the interface;
`DockerEngine` the one implementation today.
"""

from __future__ import annotations

from envbuild.engine.base import ContainerEngine

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
