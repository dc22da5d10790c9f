"""Removing the throwaway containers envbuild runs (the smoke step, the SBOM's inventory), one way.

Both are created, run and force-removed whatever happens, Ctrl-C and SIGTERM included; the removal
must be bounded (an interrupt may be waiting on it) and must not hide the exception already on its
way out.
"""

from __future__ import annotations

import contextlib

from envbuild.errors import EnvbuildError

REMOVE_TIMEOUT_S = 30  # the longest the Engine may take to remove a container


def remove_container(
    client: object,
    container: object,
    name: str,
    *,
    quiet: bool,
    what: str,
    error: type[EnvbuildError] = EnvbuildError,
) -> None:
    """Force-remove the container, by name when create was interrupted before returning it.

    quiet: an exception is already on its way out, and a failed removal must not replace it.
    what: the container's role in the message ("smoke", "inventory"); error: the class raised.
    """
    import docker.errors
    import requests

    with contextlib.suppress(AttributeError):  # bounded, also when an interrupt is waiting on it
        client.api.timeout = REMOVE_TIMEOUT_S  # type: ignore[attr-defined]
    try:
        if container is None:
            container = client.containers.get(name)  # type: ignore[attr-defined]
        container.remove(force=True)  # type: ignore[attr-defined]
    except docker.errors.NotFound:
        pass
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        if quiet or "already in progress" in str(exc):
            return
        raise error(
            f"could not remove the {what} container {name}: {exc}",
            fix=f"remove it by hand: docker rm -f {name}",
        ) from None
