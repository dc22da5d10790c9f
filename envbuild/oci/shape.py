"""Typed access to the JSON a registry serves: manifests, indexes, referrers lists, image configs.

A registry's answer is input envbuild did not write. Read with `.get()` and used as it came, a
wrongly shaped one crashed a command: `"manifests": 5`, `"platform": "linux/amd64"` (a string),
`"layers": {}`, `"config": []` or `"annotations": 3` raised AttributeError or TypeError, an internal
error (issue 33). Every reader goes through a Shape instead: each field is asked for with the type it
must have, and any other value is one EnvbuildError that names the document (registry, repository,
digest) and the field's path ("manifests[2].platform"). A field that is absent is the default; a
field that is present with another type is never passed over in silence.
"""

from __future__ import annotations

from envbuild._util.jsontext import parse_json
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError
from envbuild.oci.reference import DIGEST_RE

FIX = (
    "the registry served a malformed document: check the image reference and the registry, and push "
    "the image again with a current docker or buildx (image manifest v2 or OCI)"
)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {redact(value[:60])!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Shape:
    """One JSON object a registry served as `what` ("the manifest sha256:... of host/repo"), read
    field by field; `path` is where it sits inside that document ("manifests[0]"; "" at the top)."""

    __slots__ = ("raw", "what", "path")

    def __init__(self, value: object, what: str, path: str = "") -> None:
        self.what = what
        self.path = path
        if not isinstance(value, dict):
            raise self._error(f"{'its ' + repr(path) if path else 'it'} is {_kind(value)}, not a JSON object")
        self.raw: dict = value

    @classmethod
    def parse(cls, body: bytes, what: str) -> Shape:
        """The JSON object `body` holds; anything else (not JSON, too deep, not an object) is an error."""
        try:
            value = parse_json(body)
        except ValueError:
            raise EnvbuildError(f"{what} is not JSON", fix=FIX) from None
        return cls(value, what)

    def _error(self, why: str) -> EnvbuildError:
        return EnvbuildError(f"{self.what} is malformed: {why}", fix=FIX)

    def _field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _wrong(self, key: str, value: object, wanted: str) -> EnvbuildError:
        return self._error(f"{self._field(key)!r} is {_kind(value)}, not {wanted}")

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def text(self, key: str, default: str = "") -> str:
        """A string field; `default` when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value

    def digest(self, key: str = "digest") -> str:
        """A required "sha256:<64 hex>" field."""
        value = self.raw.get(key)
        if not isinstance(value, str) or not DIGEST_RE.fullmatch(value):
            raise (
                self._error(f"{self._field(key)!r} is missing")
                if value is None
                else self._wrong(key, value, "a digest of the form sha256:<64 hex>")
            )
        return value

    def size(self, key: str = "size") -> int | None:
        """A byte count (a whole number, 0 or more); None when absent."""
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._wrong(key, value, "a whole number of bytes")
        return value

    def obj(self, key: str) -> Shape | None:
        """A nested object; None when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._wrong(key, value, "a JSON object")
        return Shape(value, self.what, self._field(key))

    def objects(self, key: str) -> list[Shape]:
        """A list of objects; [] when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list")
        return [Shape(item, self.what, f"{self._field(key)}[{number}]") for number, item in enumerate(value)]

    def strings(self, key: str) -> list[str]:
        """A list of strings (an image config's Env); [] when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list of strings")
        for number, item in enumerate(value):
            if not isinstance(item, str):
                raise self._error(f"{self._field(key)}[{number}] is {_kind(item)}, not a string")
        return list(value)

    def mapping(self, key: str) -> dict[str, str]:
        """An object of strings (annotations, labels); {} when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._wrong(key, value, "an object of strings")
        for name, item in value.items():
            if not isinstance(item, str):
                raise self._error(f"{self._field(key)}[{name[:60]!r}] is {_kind(item)}, not a string")
        return dict(value)


def platform_of(entry: Shape) -> str | None:
    """ "os/architecture[/variant]" an index entry names; None without one, or for an attestation
    entry (unknown/unknown)."""
    platform = entry.obj("platform")
    if platform is None:
        return None
    os_name, architecture = platform.text("os"), platform.text("architecture")
    variant = platform.text("variant")
    if not os_name or not architecture or "unknown" in (os_name, architecture):
        return None
    return f"{os_name}/{architecture}" + (f"/{variant}" if variant else "")


def config_platform(config: Shape) -> tuple[str, str, str]:
    """(os, architecture, variant) an image config records, each "" when absent."""
    return config.text("os"), config.text("architecture"), config.text("variant")


def config_labels(config: Shape) -> dict[str, str]:
    """The labels an image config records (config.Labels)."""
    settings = config.obj("config")
    return settings.mapping("Labels") if settings is not None else {}
