"""A team's mirrors, from `[mirrors]` in envbuild.toml: prefix rewrites from a canonical source to the
mirror a site reaches instead, for every kind of source envbuild fetches from.

Two kinds of entry, told apart by the key:
* a URL prefix (`"https://download.pytorch.org/whl" = "https://proxy.internal/pytorch/whl"`): Python
  indexes, conda channels and the apt archives of the image's OS step;
* an image-name prefix (`"docker.io/nvidia/cuda" = "registry.internal/nvidia/cuda"`, or a whole
  registry, `"nvcr.io" = "registry.internal/nvcr"`), matched on Docker's normalised name, so
  `nvidia/cuda:12.4.1-…` is `docker.io/nvidia/cuda:12.4.1-…`.

A prefix matches at a path boundary only (`…/whl` matches `…/whl/cu124`, never `…/whlx`), and the
longest matching prefix wins. Rewriting is undone by `canonical_*` (the lock records the canonical
source beside the mirror it used, so a lock made behind a mirror checks against the spec's canonical
sources anywhere). Credentials never go in the file: a key or value holding `user@` is refused, and the
mirrors log in by credential helpers, netrc or keyring as every source does.
"""

from __future__ import annotations

import re

from envbuild._util.record import Record
from envbuild.oci.reference import DOCKER_HUB, HUB_ALIASES, parse_reference

MAX_MIRRORS = 64
URL_KIND, IMAGE_KIND = "url", "image"
# an http(s) prefix: a host, an optional port and a path of plain segments; no query, no credentials
_URL_PREFIX_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+-]+)*/?$")
# an image-name prefix: a registry (host[:port]) with an optional repository path, or a path on docker.io
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_PREFIX_RE = re.compile(
    rf"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*(?::[0-9]{{1,5}})?)(?:/{_COMPONENT})*$"
)
ACCEPTED = (
    'accepted: an http(s) URL prefix mapped to another ("https://download.pytorch.org/whl" = '
    '"https://proxy.internal/pytorch/whl"), or an image registry or repository prefix mapped to another '
    '("docker.io/nvidia/cuda" = "registry.internal/nvidia/cuda"), without credentials'
)


class Mirror(Record):
    """One rewrite: `source` (canonical, as the spec or the matrix names it) -> `mirror`."""

    __slots__ = ("source", "mirror", "kind")
    source: str
    mirror: str
    kind: str  # URL_KIND | IMAGE_KIND


def _kind(value: str) -> str | None:
    if value.startswith(("http://", "https://")):
        return URL_KIND if _URL_PREFIX_RE.fullmatch(value) else None
    return IMAGE_KIND if _IMAGE_PREFIX_RE.fullmatch(value) else None


def normalised_image_prefix(prefix: str) -> str:
    """An image-name prefix in Docker's normalised form: `nvidia/cuda` -> `docker.io/nvidia/cuda`,
    `index.docker.io/x` -> `docker.io/x`; a prefix whose first part names a registry stays."""
    first, _, rest = prefix.partition("/")
    if first in HUB_ALIASES:
        return f"{DOCKER_HUB}/{rest}" if rest else DOCKER_HUB
    if "." in first or ":" in first or first == "localhost":
        return prefix
    return f"{DOCKER_HUB}/{prefix}"


def check_entry(source: object, mirror: object) -> Mirror:
    """One [mirrors] entry, or a ValueError saying what is wrong with it and what is accepted."""
    if not isinstance(mirror, str):
        raise ValueError(f"the mirror must be a string; {ACCEPTED}")
    if not isinstance(source, str):
        raise ValueError(f"the source must be a string; {ACCEPTED}")
    if "@" in source or "@" in mirror:
        raise ValueError(
            "holds '@': credentials never go in envbuild.toml (use a credential helper, netrc or keyring)"
        )
    kinds = _kind(source), _kind(mirror)
    if kinds[0] is None:
        raise ValueError(f"the source {source!r} is not a URL or image-name prefix; {ACCEPTED}")
    if kinds[1] is None:
        raise ValueError(f"the mirror {mirror!r} is not a URL or image-name prefix; {ACCEPTED}")
    if kinds[0] != kinds[1]:
        raise ValueError(f"maps a {kinds[0]} prefix to an {kinds[1]} prefix; both must be of one kind")
    if kinds[0] == URL_KIND:
        return Mirror(source=source.rstrip("/"), mirror=mirror.rstrip("/"), kind=URL_KIND)
    return Mirror(source=normalised_image_prefix(source), mirror=mirror, kind=IMAGE_KIND)


def _under(value: str, prefix: str, separators: str) -> bool:
    return value == prefix or (value.startswith(prefix) and value[len(prefix)] in separators)


class Mirrors(Record):
    """The spec's rewrites, longest source first; an empty one rewrites nothing."""

    __slots__ = ("entries",)
    entries: tuple[Mirror, ...]

    def __bool__(self) -> bool:
        return bool(self.entries)

    def of_kind(self, kind: str) -> tuple[Mirror, ...]:
        return tuple(entry for entry in self.entries if entry.kind == kind)

    # -- URLs: indexes, channels, apt archives

    def url_entry(self, url: str) -> Mirror | None:
        """The entry that rewrites `url` (the longest matching source prefix), or None."""
        for entry in self.of_kind(URL_KIND):
            if _under(url.rstrip("/"), entry.source, "/") or _under(url, entry.source, "/"):
                return entry
        return None

    def url(self, url: str) -> str:
        """`url` with its mirror's prefix in place of the canonical one (unchanged when none applies)."""
        entry = self.url_entry(url)
        return entry.mirror + url[len(entry.source) :] if entry else url

    def canonical_url(self, url: str) -> str:
        """`url` as the canonical source names it: the inverse of `url()` for a mirrored URL."""
        for entry in sorted(self.of_kind(URL_KIND), key=lambda e: -len(e.mirror)):
            if _under(url.rstrip("/"), entry.mirror, "/") or _under(url, entry.mirror, "/"):
                return entry.source + url[len(entry.mirror) :]
        return url

    # -- image references: base images

    def image_entry(self, ref: str) -> Mirror | None:
        name = _full_name(ref)
        for entry in self.of_kind(IMAGE_KIND):
            if _under(name, entry.source, "/"):
                return entry
        return None

    def image(self, ref: str) -> str:
        """`ref` (NAME[:TAG][@DIGEST]) pulled through its mirror: the name's prefix rewritten, the tag and
        digest kept (a mirror holds the same manifests, so a digest is the same there)."""
        entry = self.image_entry(ref)
        if entry is None:
            return ref
        name, suffix = _full_name(ref), _suffix(ref)
        return entry.mirror + name[len(entry.source) :] + suffix

    def canonical_image(self, ref: str) -> str:
        """The canonical reference of an image named through a mirror (unchanged when none applies)."""
        parsed = parse_reference(ref)
        name = parsed.name
        for entry in sorted(self.of_kind(IMAGE_KIND), key=lambda e: -len(e.mirror)):
            if _under(name, entry.mirror, "/"):
                return entry.source + name[len(entry.mirror) :] + _suffix(ref)
        return ref


def _full_name(ref: str) -> str:
    """The normalised name of `ref` (docker.io/library/ubuntu for `ubuntu:22.04`)."""
    parsed = parse_reference(ref)
    registry = DOCKER_HUB if parsed.registry in HUB_ALIASES else parsed.registry
    return f"{registry}/{parsed.repository}"


def _suffix(ref: str) -> str:
    parsed = parse_reference(ref)
    explicit_tag = parsed.tag if f":{parsed.tag}" in ref.split("@", 1)[0].rsplit("/", 1)[-1] else None
    return (f":{explicit_tag}" if explicit_tag else "") + (f"@{parsed.digest}" if parsed.digest else "")


NO_MIRRORS = Mirrors(entries=())


def make_mirrors(entries: list[Mirror]) -> Mirrors:
    """The value, longest source first (the longest prefix wins), each source once."""
    return Mirrors(entries=tuple(sorted(entries, key=lambda e: (-len(e.source), e.source))))
