"""An image in the local Docker Engine, pulled by digest when it is not there yet: the labels `envbuild
promote --push` attests the image it just promoted with (`attest --attach` reads a pushed image from
its registry instead: image.registry_inventory)."""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError


class LocalImage(Record):
    __slots__ = ("image_id", "labels")
    image_id: str  # "sha256:..." (the config digest)
    labels: dict[str, str]


def local_image(ref: str) -> LocalImage:
    """`ref` in this Engine (pulled first when it names a digest the Engine lacks)."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=300)
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            if "@sha256:" not in ref:
                raise EnvbuildError(
                    f"image {ref!r} is not in this Docker Engine",
                    fix="name it by digest (REPO@sha256:...) so it can be pulled, or pull it first",
                ) from None
            image = client.images.pull(ref)
    except docker.errors.APIError as exc:
        raise EnvbuildError(
            f"cannot pull {ref}: {redact(str(exc.explanation or exc))}",
            fix="check the registry is reachable and you are logged in (docker login)",
        ) from None
    except docker.errors.DockerException as exc:
        raise EnvbuildError(
            f"cannot reach the Docker Engine: {redact(str(exc))}",
            fix="start dockerd, or point DOCKER_HOST at a running engine",
        ) from None
    return LocalImage(image_id=str(image.id), labels=dict(image.labels or {}))
