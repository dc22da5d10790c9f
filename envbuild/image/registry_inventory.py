"""What a pushed image holds, read from its registry: no Docker Engine, no container.

`envbuild attest REPO@sha256:... --attach` runs in CI promote jobs that may have no Docker daemon, so
it cannot pull the image and run image.inventory's container. `read_registry_inventory(ref)` reads
the same facts from the registry instead: the manifest (an index gives its linux/amd64 image, or its
only one; `platform=` picks another), the config (Env, labels, the image id) and each layer as it
streams (envbuild.oci.registry.stream_layers), keeping only the files the inventory needs, with the
layers' whiteouts applied in order (envbuild.image.layers):

- `var/lib/dpkg/status`: the last layer that writes it wins, a whiteout deletes it;
- the core metadata of every Python distribution in a `site-packages` or `dist-packages` directory
  (`*.dist-info/METADATA`, `*.egg-info/PKG-INFO`, a single-file `*.egg-info`), and each `pyvenv.cfg`;
- every `conda-meta/*.json`.

Only those files' bytes are kept (on disk, under a temporary directory); the rest of each layer is
read past. Then the same pure parsers as the container's output go over them (image.inventory).

Which Python environment is listed: the container asks the image's own Python; here the rule is the
one its script follows, by what the filesystem holds rather than by which interpreter runs:

1. the first of $VIRTUAL_ENV, $CONDA_PREFIX, $MAMBA_ROOT_PREFIX (from the config's Env) and
   /opt/conda that has distributions in `PREFIX/lib/python*/site-packages` gives them; a venv whose
   pyvenv.cfg says `include-system-site-packages = true` adds the system's after its own;
2. else the system python3: a python.org build in /usr/local (`usr/local/lib/python3.X/site-packages`,
   first on the official images' PATH) when it has distributions, else Debian's python3
   (`usr/local/lib/python3.X/dist-packages`, `usr/lib/python3/dist-packages`,
   `usr/lib/python3.X/dist-packages`, in its sys.path order).

A name found in two directories is listed once, as the first directory on that path has it, as
Python imports it. User site-packages (~/.local) are not read: the container's Python, run as the
image's user, would see them; envbuild's images install nothing there. The conda packages are those
of $CONDA_PREFIX, else $MAMBA_ROOT_PREFIX, else /opt/conda, as in the container.
"""

from __future__ import annotations

import posixpath
import re
import tempfile

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import EnvbuildError, UsageError
from envbuild.image.inventory import (
    Inventory,
    parse_conda_meta,
    parse_dpkg_status,
    parse_env,
    python_dists_from_metadata,
)
from envbuild.image.layers import Layers
from envbuild.oci.reference import parse_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

DPKG_STATUS = "var/lib/dpkg/status"
PYVENV_CFG = "pyvenv.cfg"
SITE_DIRECTORIES = ("site-packages", "dist-packages")
DEFAULT_PLATFORM = "linux/amd64"

_VENV_SITE = r"lib/python3[0-9.]*/site-packages"
_LOCAL_SITE = re.compile(r"usr/local/lib/python3[0-9.]*/site-packages")
_DEBIAN_SITES = (
    re.compile(r"usr/local/lib/python3[0-9.]*/dist-packages"),
    re.compile(r"usr/lib/python3/dist-packages"),
    re.compile(r"usr/lib/python3\.[0-9]+/dist-packages"),
)
_SYSTEM_SITE_ON = re.compile(r"(?mi)^\s*include-system-site-packages\s*=\s*true\s*$")


class RegistryImage(Record):
    """One platform image as its registry holds it: what it holds, its image id (the config digest,
    what `docker images` shows for it once pulled and what `verify` records), its config's labels and
    its platform ("linux/amd64")."""

    __slots__ = ("inventory", "image_id", "labels", "platform")
    inventory: Inventory
    image_id: str
    labels: dict[str, str]
    platform: str


# --- which files: pure, on paths relative to the image's root ("usr/lib/...") -----------------------


def metadata_directory(path: str) -> str | None:
    """The site-packages or dist-packages directory whose distribution `path` is the core metadata
    of ("usr/lib/python3/dist-packages" for ".../six-1.16.0.dist-info/METADATA"); None otherwise."""
    parent, name = posixpath.split(path)
    if name.endswith(".egg-info"):  # a single-file egg-info is the PKG-INFO itself
        site = parent
    elif (name == "METADATA" and parent.endswith(".dist-info")) or (
        name == "PKG-INFO" and parent.endswith(".egg-info")
    ):
        site = posixpath.dirname(parent)
    else:
        return None
    return site if posixpath.basename(site) in SITE_DIRECTORIES else None


def inventory_path(path: str) -> bool:
    """Whether the registry reader keeps the file at `path`: Layers' `keep` predicate."""
    parent, name = posixpath.split(path)
    return (
        path == DPKG_STATUS
        or name == PYVENV_CFG
        or (posixpath.basename(parent) == "conda-meta" and name.endswith(".json"))
        or metadata_directory(path) is not None
    )


def _prefix(value: str | None) -> str | None:
    """An Env path as a root-relative path ("/opt/venv/" -> "opt/venv"); None when unset or "/"."""
    if not value:
        return None
    return posixpath.normpath("/" + value).lstrip("/") or None


def _system_directories(sites: list[str]) -> list[str]:
    local = [site for site in sites if _LOCAL_SITE.fullmatch(site)]
    if local:
        return local
    return [site for pattern in _DEBIAN_SITES for site in sites if pattern.fullmatch(site)]


def python_directories(paths: Iterable[str], env: dict[str, str], read: Callable[[str], str]) -> list[str]:
    """The site directories of the image's Python environment, in sys.path order (the module
    docstring's rule); `paths` are the kept files, `read(path)` gives one's text (pyvenv.cfg)."""
    kept = set(paths)
    sites = sorted({site for path in kept if (site := metadata_directory(path)) is not None})
    venv = _prefix(env.get("VIRTUAL_ENV"))
    for prefix in (
        venv,
        _prefix(env.get("CONDA_PREFIX")),
        _prefix(env.get("MAMBA_ROOT_PREFIX")),
        "opt/conda",
    ):
        if prefix is None:
            continue
        pattern = re.compile(re.escape(prefix) + "/" + _VENV_SITE)
        own = [site for site in sites if pattern.fullmatch(site)]
        if not own:
            continue
        config = f"{prefix}/{PYVENV_CFG}"
        if prefix == venv and config in kept and _SYSTEM_SITE_ON.search(read(config)):
            own += [site for site in _system_directories(sites) if site not in own]
        return own
    return _system_directories(sites)


def inventory_from_files(paths: Iterable[str], env: dict[str, str], read: Callable[[str], str]) -> Inventory:
    """The Inventory of an image whose kept files (inventory_path) are `paths`, `read(path)` giving a
    file's text: parsed by image.inventory's parsers, as the container's output is."""
    kept = sorted(set(paths))
    directories = python_directories(kept, env, read)
    metadata = [read(path) for site in directories for path in kept if metadata_directory(path) == site]
    conda = _prefix(env.get("CONDA_PREFIX")) or _prefix(env.get("MAMBA_ROOT_PREFIX")) or "opt/conda"
    meta = [
        read(path)
        for path in kept
        if posixpath.dirname(path) == f"{conda}/conda-meta"
        and not posixpath.basename(path).startswith(".")
        and path.endswith(".json")
    ]
    return Inventory(
        os_packages=parse_dpkg_status(read(DPKG_STATUS) if DPKG_STATUS in kept else ""),
        python=python_dists_from_metadata(metadata),
        conda=parse_conda_meta(meta),
        env=dict(env),
    )


# --- the registry -----------------------------------------------------------------------------------


def _platform_digest(ref: str, platform: str | None, docker_config: str | None) -> str:
    """The digest of the platform image manifest to read: `platform`'s; by default linux/amd64's, or
    the image's only platform (a single-platform image of any architecture, as `docker pull` takes)."""
    from envbuild.oci.registry import PlatformMissing, platform_manifest

    if platform:
        return platform_manifest(ref, platform, docker_config=docker_config)
    try:
        return platform_manifest(ref, DEFAULT_PLATFORM, docker_config=docker_config)
    except PlatformMissing as exc:
        if len(exc.platforms) == 1:
            return platform_manifest(ref, exc.platforms[0], docker_config=docker_config)
        raise UsageError(
            f"{ref} is an image index without a {DEFAULT_PLATFORM} image; it has "
            + (", ".join(exc.platforms) or "no platform entries"),
            fix="name one platform's image by its own manifest digest (REPO@sha256:...)",
        ) from None


def read_registry_inventory(
    ref: str, *, docker_config: str | None = None, platform: str | None = None
) -> RegistryImage:
    """What the image `ref` ("registry/repo@sha256:...", a manifest or an index) holds, read from its
    registry (see the module docstring); `docker_config` is where the registry's credentials are."""
    from envbuild.oci.registry import Repository, config_descriptor, json_object, stream_layers
    from envbuild.oci.shape import config_labels, config_platform

    parsed = parse_reference(ref)  # a malformed reference is a UsageError before any request
    digest = _platform_digest(ref, platform, docker_config)
    repository = Repository(ref, docker_config=docker_config)
    body, media_type, _ = repository.manifest(digest)
    what = f"the manifest {digest} of {repository.where}"
    config_digest = config_descriptor(json_object(body, what), what, media_type)
    config = json_object(
        repository.blob(config_digest), f"the config blob {config_digest} of {repository.where}"
    )
    settings = config.obj("config")
    env = parse_env(settings.strings("Env") if settings is not None else [])
    labels = config_labels(config)
    os_name, architecture, variant = config_platform(config)
    found = f"{os_name or 'linux'}/{architecture or 'amd64'}" + (f"/{variant}" if variant else "")
    with tempfile.TemporaryDirectory(prefix="envbuild-registry-inventory-") as scratch:
        layers = Layers(scratch, keep=inventory_path)
        order: list[str] = []
        for layer, layer_type, reader in stream_layers(
            f"{parsed.name}@{digest}", docker_config=docker_config
        ):
            if "zstd" in layer_type:
                raise EnvbuildError(
                    f"layer {layer} of {ref} is zstd-compressed ({layer_type}), which envbuild cannot read",
                    fix="push the image with gzip layers (the docker and buildx default)",
                )
            layers.read(layer, reader, ref)
            order.append(layer)
        kept = layers.survivors(order)

        def read(path: str) -> str:
            with open(kept[path], "rb") as handle:
                return handle.read().decode("utf-8", "replace")

        inventory = inventory_from_files(kept, env, read)
    return RegistryImage(
        inventory=inventory,
        image_id=config_digest,
        labels=labels,
        platform=found,
    )
