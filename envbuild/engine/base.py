"""What a container engine is to envbuild, and the one error every engine request fails with.

The interface is small on purpose: the questions the stages ask of images (inspect, id, platform,
version) are methods with plain answers, and the long operations that stream (build, run, push) get
the engine's client with the timeout their caller names. Each caller turns an EngineError into its
own stage's error (a BuildError, a VerifyError, a PromoteError) with its own fix, because what to do
about an unreachable engine depends on what the user was trying to do.
"""

from __future__ import annotations

from typing import Any, ClassVar

from envbuild.errors import EnvbuildError

# How long one request of each kind may wait. A quick question (inspect, tag, version) never needs a
# minute; a pull or a `docker save` read of a multi-GB CUDA image may; a build's stream has no bound of
# its own (the build stage bounds it).
QUICK_S = 60
VERSION_S = 10  # the version a build record names: best effort, never holds a build up
TRANSFER_S = 300

UNREACHABLE_FIX = "start dockerd, or point DOCKER_HOST at a running engine"
REFUSED_FIX = "check that dockerd is healthy (`docker info`) and what the engine said"


class EngineError(EnvbuildError):
    """The engine could not be reached, or refused a request. `message` is the engine's own words
    (credentials redacted); `status` is the HTTP status of a refusal (None: not reached)."""

    def __init__(self, message: str, *, status: int | None = None, fix: str | None = UNREACHABLE_FIX) -> None:
        super().__init__(message, fix=fix)
        self.status = status


class ContainerEngine:
    """One container engine. Subclasses fill the hooks; nothing else in envbuild builds a client."""

    name: ClassVar[str] = "engine"
    title: ClassVar[str] = "the container engine"  # in messages: "cannot reach the Docker Engine"
    gpu_paths: ClassVar[tuple[str, ...]] = ("cdi", "legacy")  # how its containers can reach GPUs (cdi.py)

    def client(self, timeout: float | None = QUICK_S) -> Any:
        """The engine's high-level client, each request waiting at most `timeout` seconds (None: no
        bound). Raises EngineError when the engine cannot be reached."""
        raise NotImplementedError

    def api(self, timeout: float | None = QUICK_S) -> Any:
        """The engine's low-level API client (the build stream, inspect by id)."""
        raise NotImplementedError

    def inspect_image(self, ref: str, *, timeout: float | None = QUICK_S) -> dict[str, Any] | None:
        """`docker image inspect ref`: the image's attributes, or None when the engine lacks it."""
        raise NotImplementedError

    def image_id(self, ref: str) -> str | None:
        """The image's config digest (sha256:...), or None when the engine lacks it."""
        attrs = self.inspect_image(ref)
        return None if attrs is None else str(attrs["Id"])

    def pull(self, ref: str, *, timeout: float | None = TRANSFER_S) -> dict[str, Any]:
        """Pull `ref` (a digest-pinned reference) and inspect it. EngineError with the registry's
        words (and `status`) when the pull is refused."""
        raise NotImplementedError

    def load_image(self, chunks: Any, *, timeout: float | None = TRANSFER_S) -> None:
        """`docker load`: stream the docker-archive tar `chunks` (an iterator of bytes) to the engine.
        EngineError with the engine's words when it refuses the archive."""
        raise NotImplementedError

    def version(self) -> str | None:
        """The engine's version, or None when it cannot say (best effort: for records)."""
        raise NotImplementedError

    def create_container(self, client: Any, image: str, options: dict[str, Any], *, gpu: str | None) -> Any:
        """Create (not start) a container of `image` with the docker SDK's `containers.create` options,
        given every GPU through path `gpu` ("cdi" | "legacy"; None: no GPU). Returns the SDK's
        Container; the SDK's errors pass through for the caller to word."""
        raise NotImplementedError

    def close(self) -> None:
        """Give back what this engine started for the process (Podman: its API service); a no-op else."""

    def remove_tags(self, tags: list[str]) -> None:
        """Untag each of `tags` (the image stays); best effort, for undoing a failed promotion."""
        raise NotImplementedError
