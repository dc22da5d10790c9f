"""The Docker Engine, through the docker SDK, imported only when a request is made: `envbuild
resolve` never pays for it.

Where the engine is comes from the environment as the docker CLI reads it (DOCKER_HOST,
DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), or from `base_url`. Every SDK failure leaves here as an
EngineError, redacted: a registry's error can quote a URL with credentials in it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from envbuild._util.redact import redact
from envbuild.engine.base import QUICK_S, REFUSED_FIX, TRANSFER_S, VERSION_S, ContainerEngine, EngineError


class DockerEngine(ContainerEngine):
    name = "docker"
    title = "Docker Engine"

    def __init__(self, *, base_url: str | None = None) -> None:
        self.base_url = base_url

    def _where(self) -> dict[str, Any]:
        import docker.utils

        return {"base_url": self.base_url} if self.base_url else docker.utils.kwargs_from_env()

    def client(self, timeout: float | None = QUICK_S) -> Any:
        import docker

        with _translated():
            return docker.DockerClient(version="auto", timeout=timeout, **self._where())

    def api(self, timeout: float | None = QUICK_S) -> Any:
        import docker

        with _translated():
            return docker.APIClient(version="auto", timeout=timeout, **self._where())

    def inspect_image(self, ref: str, *, timeout: float | None = QUICK_S) -> dict[str, Any] | None:

        client = self.api(timeout)
        try:
            with _translated():
                return client.inspect_image(ref)
        except EngineError as exc:
            if exc.status == 404:
                return None
            raise
        finally:
            client.close()

    def pull(self, ref: str, *, timeout: float | None = TRANSFER_S) -> dict[str, Any]:
        client = self.client(timeout)
        try:
            with _translated():
                return client.images.pull(ref).attrs
        finally:
            client.close()

    def load_image(self, chunks: Any, *, timeout: float | None = TRANSFER_S) -> None:
        client = self.api(timeout)
        try:
            with _translated():
                for message in client.load_image(chunks):  # the Engine's progress, and its error
                    if isinstance(message, dict) and message.get("error"):
                        raise EngineError(redact(str(message["error"])), fix=REFUSED_FIX)
        finally:
            client.close()

    def version(self) -> str | None:
        try:  # best effort, for a record: whatever goes wrong (the SDK raises more than its own errors)
            client = self.client(VERSION_S)
        except Exception:
            return None
        try:
            return client.version().get("Version")
        except Exception:
            return None
        finally:
            client.close()

    def create_container(self, client: Any, image: str, options: dict[str, Any], *, gpu: str | None) -> Any:
        import docker.types

        from envbuild.engine.cdi import ALL_GPUS

        if gpu == "cdi":  # the Engine resolves the CDI device itself (Docker >= 25, CDI enabled)
            options = {
                **options,
                "device_requests": [docker.types.DeviceRequest(driver="cdi", device_ids=[ALL_GPUS])],
            }
        elif gpu == "legacy":  # count=-1 is every GPU: the default count of a DeviceRequest is 0 GPUs
            request = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
            options = {**options, "device_requests": [request]}
        return client.containers.create(image, **options)

    def remove_tags(self, tags: list[str]) -> None:
        try:  # best effort: this undoes a promotion that already failed, and must not hide why
            client = self.client(QUICK_S)
        except Exception:
            return
        try:
            for tag in tags:
                with contextlib.suppress(Exception):
                    client.images.remove(tag, noprune=True)
        finally:
            client.close()


@contextlib.contextmanager
def _translated():
    """The SDK's exceptions (and requests', which it lets through on a timeout or a reset) as one
    EngineError: the status of a refusal, the engine's explanation, credentials redacted."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except docker.errors.APIError as exc:
        raise EngineError(
            redact(str(exc.explanation or exc)), status=exc.status_code, fix=REFUSED_FIX
        ) from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(redact(str(exc))) from None
