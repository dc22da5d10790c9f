"""An image in the local Docker Engine, pulled by digest when it is not there yet: the labels `envbuild
promote --push` attests the image it just promoted with (`attest --attach` reads a pushed image from
its registry instead: image.registry_inventory)."""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import EnvbuildError


class LocalImage(Record):
    __slots__ = ("image_id", "labels")
    image_id: str  # "sha256:..." (the config digest)
    labels: dict[str, str]


def local_image(ref: str) -> LocalImage:
    """`ref` in this Engine (pulled first when it names a digest the Engine lacks)."""
    engine = current_engine()
    try:
        attrs = engine.inspect_image(ref)
    except EngineError as exc:
        raise EnvbuildError(f"cannot reach the Docker Engine: {exc.message}", fix=exc.fix) from None
    if attrs is None:
        if "@sha256:" not in ref:
            raise EnvbuildError(
                f"image {ref!r} is not in this Docker Engine",
                fix="name it by digest (REPO@sha256:...) so it can be pulled, or pull it first",
            )
        try:
            attrs = engine.pull(ref)
        except EngineError as exc:
            raise EnvbuildError(
                f"cannot pull {ref}: {exc.message}",
                fix="check the registry is reachable and you are logged in (docker login)",
            ) from None
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return LocalImage(image_id=str(attrs["Id"]), labels=dict(labels))
