"""The labels of an image that `envbuild verify` is about to audit and smoke: what the image says it was
rendered for (its framework, spec.smokelabels' smoke settings), read without pulling or running it.

Where from follows what will run it: a Docker verify of an image the Engine holds reads the Engine's
inspect; a REPO@sha256:... the Engine does not hold (or any runtime but Docker, which fetches by digest
itself) is read from its registry, as the config of the host platform's image (an index's entry, as
runtime.driver picks it). No layer is downloaded. The labels are returned as found: untrusted, judged by
the caller.

`docker` is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

from envbuild.audit.libraries import FRAMEWORK_LIBRARIES
from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from envbuild.errors import EnvbuildError, VerifyError
from envbuild.image.platforms import host_platform
from envbuild.oci.labels import FRAMEWORK


def image_labels(image: str, *, runtime: str = "docker") -> dict[str, object]:
    """The image's labels ({} when it has none); a VerifyError saying why when they cannot be read."""
    digest = "@sha256:" in image  # as verify_image decides to pull: an image id or a name is the Engine's
    if runtime == "docker" or not digest:
        found = _engine_labels(image, required=not digest)
        if found is not None:
            return found
    return _registry_labels(image)


def _engine_labels(image: str, *, required: bool) -> dict[str, object] | None:
    """The labels the local Engine's inspect gives; None when the Engine lacks the image (or there is
    no Engine) and `required` is false, else a VerifyError."""
    try:
        attrs = current_engine().inspect_image(image)
    except EngineError as exc:
        if required:
            raise VerifyError(
                f"cannot read the labels of {image!r}: no Docker Engine answered ({exc.message})"
            ) from None
        return None
    if attrs is None:
        if required:
            raise VerifyError(f"cannot read the labels of {image!r}: it is not in the local Docker Engine")
        return None
    return _labels((attrs.get("Config") or {}).get("Labels"))


def _registry_labels(image: str) -> dict[str, object]:
    from envbuild.oci.registry import image_config

    host = host_platform()
    try:
        _, config = image_config(image, platform=host.name if host else "linux/amd64")
    except EnvbuildError as exc:
        raise VerifyError(f"cannot read the labels of {image!r} from its registry: {exc.message}") from None
    return _labels((config.get("config") or {}).get("Labels"))


def _labels(found: object) -> dict[str, object]:
    """The Labels object of a config, as given; anything but a JSON object has no labels."""
    if not isinstance(found, dict):
        return {}
    return {key: value for key, value in found.items() if isinstance(key, str)}


def framework_label(labels: dict[str, object], image: str) -> tuple[str | None, str | None]:
    """(the framework the image's io.envbuild.framework label names, None) when it is one the audit
    knows, else (None, a warning naming the label when it holds something else). `envbuild build`'s
    audit gate judges the framework's own libraries; without the label the gate finds the framework
    from the libraries, as `envbuild audit` does."""
    value = labels.get(FRAMEWORK)
    if value is None:
        return None, None
    if isinstance(value, str) and value in FRAMEWORK_LIBRARIES:
        return value, None
    shown, accepted = repr(value)[:60], ", ".join(sorted(FRAMEWORK_LIBRARIES))
    return None, (
        f"{image}: ignoring the label {FRAMEWORK}={shown}: accepted: {accepted}; "
        "the audit finds the framework from the libraries"
    )
