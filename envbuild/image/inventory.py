"""What a local image actually holds: its Debian packages, Python distributions and conda packages.

The SBOM (attest.sbom) lists what is in the image, not what the build meant to put there: a package
the base image brought, or one a later layer removed, is only seen by looking. `read_inventory(image)`
looks once, in ONE throwaway container (no network, the image's own user, a label saying what it is,
removed in a `finally` on success, failure, timeout and interrupt alike) whose /bin/sh prints:

1. /var/lib/dpkg/status (empty on an image without dpkg);
2. `importlib.metadata`'s distributions, one JSON [name, version] a line, from the image's own
   Python: $VIRTUAL_ENV/bin/python, the conda env's, else python3 or python on PATH; nothing at all
   on an image without Python (then `Inventory.python` is empty);
3. every conda-meta/*.json of the conda env ($CONDA_PREFIX, $MAMBA_ROOT_PREFIX, else /opt/conda, where
   micromamba images keep their base env).

Each section starts on a line of its own with a marker holding a random nonce made for this call, so
no file's content can end a section early; a missing end marker means the output was cut and is an
error, never a short inventory. The parsers are pure and take the captured text: the unit tests run
them on real captures (tests/fixtures/attest/).

An image for another platform runs under QEMU, as `verify` runs it: the inventory is the image's.
`docker` and `requests` are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import uuid

from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild._util.redact import redact
from envbuild.engine import current_engine
from envbuild.engine.base import QUICK_S, UNREACHABLE_FIX, EngineError
from envbuild.errors import EnvbuildError
from envbuild.image.containers import remove_container
from envbuild.image.platforms import describe, platform_of, runnable
from envbuild.oci.labels import ROLE

INVENTORY_TIMEOUT_S = 300  # an emulated (QEMU) image's Python takes a while to start and import
INSTALLED = "install ok installed"  # the dpkg Status of a package that is on disk and configured
SECTIONS = ("dpkg", "python", "conda", "end")

# Prints its distributions as JSON lines. Python 3.8+ (importlib.metadata); an older or broken Python
# prints nothing, and the image is listed without Python packages rather than failing the build.
_PY = (
    "import importlib.metadata as m, json\n"
    "for d in m.distributions():\n"
    "    n = d.metadata['Name']\n"
    "    if n: print(json.dumps([n, d.version]))\n"
)

_CANONICAL_RE = re.compile(r"[-_.]+")


class OsPackage(Record):
    """One installed Debian package: dpkg's Package, Version, Architecture and source package name."""

    __slots__ = ("name", "version", "architecture", "source")
    name: str
    version: str
    architecture: str
    source: str


class PythonDist(Record):
    """One Python distribution the image's Python imports from: its canonical (PEP 503) name."""

    __slots__ = ("name", "version")
    name: str
    version: str


class CondaPackage(Record):
    """One package of the image's conda env, as its conda-meta record says (sha256 may be None)."""

    __slots__ = ("name", "version", "build", "channel", "subdir", "url", "sha256")
    name: str
    version: str
    build: str
    channel: str
    subdir: str
    url: str | None
    sha256: str | None


class Inventory(Record):
    """What one image holds. env: the image config's Env (NVIDIA_REQUIRE_CUDA, PATH, ...)."""

    __slots__ = ("os_packages", "python", "conda", "env")
    os_packages: tuple[OsPackage, ...]
    python: tuple[PythonDist, ...]
    conda: tuple[CondaPackage, ...]
    env: dict[str, str]


def canonical_name(name: str) -> str:
    """PEP 503's normalized project name: "Typing_Extensions" -> "typing-extensions"."""
    return _CANONICAL_RE.sub("-", name).lower()


# --- the pure parsers ---------------------------------------------------------------------------


def parse_dpkg_status(text: str) -> tuple[OsPackage, ...]:
    """The "install ok installed" entries of a /var/lib/dpkg/status text, sorted by name and arch.

    A Source field may carry its own version ("python3-defaults (3.11.2-1)"): only the name is kept;
    a package without one is its own source.
    """
    found = []
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if not line or line[0] in " \t":  # a continuation of a multi-line field
                continue
            key, colon, value = line.partition(":")
            if colon:
                fields[key.strip().lower()] = value.strip()
        if fields.get("status") != INSTALLED or not fields.get("package") or not fields.get("version"):
            continue
        name = fields["package"]
        source = (fields.get("source") or name).split(" ", 1)[0]
        found.append(
            OsPackage(
                name=name,
                version=fields["version"],
                architecture=fields.get("architecture", ""),
                source=source,
            )
        )
    return tuple(sorted(set(found), key=lambda p: (p.name, p.architecture)))


def parse_python_dists(text: str) -> tuple[PythonDist, ...]:
    """The JSON [name, version] lines the inventory's Python printed, by canonical name.

    A name found twice on sys.path is listed once, as Python imports it: the first one.
    """
    found: dict[str, PythonDist] = {}
    for line in text.splitlines():
        try:
            name, version = parse_json(line)
        except (ValueError, TypeError):
            continue
        if isinstance(name, str) and isinstance(version, str) and name:
            found.setdefault(canonical_name(name), PythonDist(name=canonical_name(name), version=version))
    return tuple(found[name] for name in sorted(found))


def metadata_name_version(text: str) -> tuple[str, str] | None:
    """(Name, Version) of a distribution's core metadata (a .dist-info/METADATA or .egg-info PKG-INFO
    text: RFC 822 headers up to the first blank line), as importlib.metadata reads them; None when
    one is missing."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, colon, value = line.partition(":")
        if colon and line[0] not in " \t":
            found.setdefault(key.strip().lower(), value.strip())
    name, version = found.get("name"), found.get("version")
    return (name, version) if name and version else None


def python_dists_from_metadata(documents: list[str]) -> tuple[PythonDist, ...]:
    """The distributions of metadata texts given in sys.path order, through parse_python_dists (the
    parser of what the in-container Python prints), so a name found twice is listed as the first."""
    lines = []
    for text in documents:
        pair = metadata_name_version(text)
        if pair:
            lines.append(json.dumps(list(pair)))
    return parse_python_dists("\n".join(lines))


def parse_conda_meta(documents: list[str]) -> tuple[CondaPackage, ...]:
    """The packages of a conda env from the texts of its conda-meta/*.json files, sorted by name.

    channel is the channel's name ("conda-forge") whether the file gives it so or as its URL
    ("https://conda.anaconda.org/conda-forge/linux-64", as recent conda and micromamba write it).
    """
    found = []
    for text in documents:
        try:
            meta = parse_json(text)
        except ValueError:
            continue
        if not isinstance(meta, dict) or not meta.get("name") or not meta.get("version"):
            continue
        subdir = str(meta.get("subdir") or "")
        channel = str(meta.get("channel") or "").rstrip("/")
        if channel.endswith("/" + subdir) and subdir:
            channel = channel[: -len(subdir) - 1]
        if "://" in channel:
            channel = channel.rsplit("/", 1)[-1]
        sha256 = meta.get("sha256")
        found.append(
            CondaPackage(
                name=str(meta["name"]),
                version=str(meta["version"]),
                build=str(meta.get("build") or meta.get("build_string") or ""),
                channel=channel,
                subdir=subdir,
                url=redact(str(meta["url"])) if meta.get("url") else None,
                sha256=str(sha256).lower() if isinstance(sha256, str) and sha256 else None,
            )
        )
    return tuple(sorted(found, key=lambda p: (p.name, p.version, p.build)))


def parse_env(env: list[str] | None) -> dict[str, str]:
    """An image config's Env list ("KEY=value") as a dict."""
    out: dict[str, str] = {}
    for item in env or ():
        key, _, value = str(item).partition("=")
        if key:
            out[key] = value
    return out


def split_sections(text: str, marker: str) -> list[tuple[str, str]]:
    """[(section, its text)] of the container's output, in order; an EnvbuildError when the end marker
    is missing (the output was cut short) or a section is unknown."""
    parts: list[tuple[str, str]] = []
    pattern = re.compile(rf"(?m)^{re.escape(marker)} (\w+)$")
    matches = list(pattern.finditer(text))
    for index, match in enumerate(matches):
        stop = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() + 1 : stop]
        parts.append((match.group(1), body[:-1] if body.endswith("\n") else body))
    if not parts or parts[-1][0] != "end" or any(name not in SECTIONS for name, _ in parts):
        raise EnvbuildError(
            "the inventory container's output was cut short or garbled: no end marker",
            fix="check the image runs /bin/sh and that dockerd is healthy (`docker info`), then retry",
        )
    return parts


def parse_inventory(text: str, marker: str, env: dict[str, str]) -> Inventory:
    """The Inventory the inventory script's output `text` (with its `marker`) describes."""
    parts = split_sections(text, marker)
    body = {name: "\n".join(t for n, t in parts if n == name) for name in ("dpkg", "python")}
    return Inventory(
        os_packages=parse_dpkg_status(body["dpkg"]),
        python=parse_python_dists(body["python"]),
        conda=parse_conda_meta([t for n, t in parts if n == "conda"]),
        env=dict(env),
    )


def inventory_script(marker: str) -> str:
    """The /bin/sh program the container runs; `marker` starts each section's line."""
    python = shlex.quote(_PY)
    return f"""M='{marker}'
printf '%s dpkg\\n' "$M"
cat /var/lib/dpkg/status 2>/dev/null
printf '\\n%s python\\n' "$M"
py=''
for c in "${{VIRTUAL_ENV:-/nonexistent}}/bin/python" "${{CONDA_PREFIX:-/nonexistent}}/bin/python" \\
         "${{MAMBA_ROOT_PREFIX:-/nonexistent}}/bin/python" /opt/conda/bin/python; do
  if [ -x "$c" ]; then py="$c"; break; fi
done
[ -n "$py" ] || py="$(command -v python3 2>/dev/null || command -v python 2>/dev/null || true)"
if [ -n "$py" ]; then "$py" -c {python} 2>/dev/null || true; fi
prefix="${{CONDA_PREFIX:-${{MAMBA_ROOT_PREFIX:-/opt/conda}}}}"
for f in "$prefix"/conda-meta/*.json; do
  [ -f "$f" ] || continue
  printf '\\n%s conda\\n' "$M"
  cat "$f"
done
printf '\\n%s end\\n' "$M"
"""


# --- the container ------------------------------------------------------------------------------


def _fail(what: str, exc: Exception) -> EnvbuildError:
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return EnvbuildError(
        f"cannot {what} the inventory container: {redact(str(text))}",
        fix="check the image reference and that dockerd is healthy (`docker info`)",
    )


def read_inventory(image: str, *, timeout: int = INVENTORY_TIMEOUT_S) -> Inventory:
    """What the local image `image` holds (see the module docstring); the container never outlives
    the call."""
    import docker.errors
    import requests

    engine = current_engine()
    try:
        attrs = engine.inspect_image(image)
        client = engine.client(timeout=max(timeout, QUICK_S))
    except EngineError as exc:
        raise EnvbuildError(
            f"cannot read image {image!r} from the Docker Engine: {exc.message}", fix=UNREACHABLE_FIX
        ) from None
    if attrs is None:
        raise EnvbuildError(
            f"image {image!r} is not in this Docker Engine",
            fix="build it first (`envbuild build`), or pull it",
        )
    platform = platform_of(attrs)
    if platform is not None:
        run = runnable(platform)
        if not run.ok:
            raise EnvbuildError(f"cannot list what {image!r} holds: {run.reason}", fix=run.fix)
    env = parse_env((attrs.get("Config") or {}).get("Env"))

    marker = f"--envbuild-inventory-{uuid.uuid4().hex}--"
    name = f"envbuild-inventory-{uuid.uuid4().hex[:12]}"
    container = None
    try:
        try:
            container = client.containers.create(
                image,
                entrypoint=["/bin/sh", "-c"],
                command=[inventory_script(marker)],
                name=name,
                network_disabled=True,
                network_mode="none",
                labels={ROLE: "inventory"},
                # the listing runs the image's Python: its preflight guard judges a node, not a listing
                environment={"ENVBUILD_PREFLIGHT": "off"},
                detach=True,
            )
            container.start()
        except docker.errors.APIError as exc:
            raise _fail("start", exc) from None
        try:
            result = container.wait(timeout=timeout)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
            raise EnvbuildError(
                f"listing what {image!r} ({describe(attrs)}) holds did not finish within {timeout}s",
                fix="check that dockerd is healthy (`docker info`); an emulated image is slow: retry",
            ) from None
        code = int(result.get("StatusCode", -1))
        output = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        if code != 0:
            errors = container.logs(stdout=False, stderr=True).decode("utf-8", "replace").strip()
            raise EnvbuildError(
                f"the inventory container of {image!r} exited {code}: {redact(errors[-500:]) or 'no output'}",
                fix="the image needs /bin/sh and cat (a distroless image cannot be listed)",
            )
    finally:
        remove_container(client, container, name, quiet=sys.exc_info()[1] is not None, what="inventory")
    return parse_inventory(output, marker, env)
