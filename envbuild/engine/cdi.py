"""CDI: how GPU hosts now hand devices to containers, and which GPU path a smoke step takes.

The NVIDIA Container Toolkit generates a Container Device Interface spec by default since 1.18
(`nvidia-cdi-refresh`; by hand: `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`). Podman
reaches GPUs only through one, and Docker >= 25 does too when asked for `nvidia.com/gpu=all`. The
legacy path is the Docker SDK's `DeviceRequest(count=-1, capabilities=[["gpu"]])`, which the
toolkit's runtime hook serves.

A spec is YAML or JSON: `cdiVersion`, `kind` (vendor/class, "nvidia.com/gpu"), and `devices`, each
with a `name` ("0", a UUID, "all"). envbuild needs only the kind and the device names, so it reads
them without a YAML library: JSON is parsed as JSON, and YAML as the block layout every CDI writer
emits (nvidia-ctk, the GPU operator, the DRA driver): a top-level `kind:` line and a top-level
`devices:` list whose items carry `name:`. Spec files are untrusted: each is read to MAX_SPEC_BYTES,
and at most MAX_SPECS files and MAX_DEVICES names are kept.
"""

from __future__ import annotations

import json
import os

from envbuild._util.record import Record

SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")  # the CDI spec directories every CDI runtime reads by default
DIRS_VAR = "ENVBUILD_CDI_SPEC_DIRS"  # colon-separated directories instead (a site's own, and the tests')
GPU_KIND = "nvidia.com/gpu"
ALL_GPUS = f"{GPU_KIND}=all"
GPU_ACCESS = ("auto", "legacy", "cdi")
MAX_SPEC_BYTES = 1024 * 1024
MAX_SPECS = 64
MAX_DEVICES = 1024
GENERATE_FIX = "generate one with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
NO_SPEC = f"no CDI device {GPU_KIND} on this host: {GENERATE_FIX}"


class CdiSpec(Record):
    """One spec file: where it is, its kind, its device names, or why it could not be read."""

    __slots__ = ("path", "kind", "devices", "problem")
    path: str
    kind: str | None
    devices: tuple[str, ...]
    problem: str | None  # None: read


def spec_dirs() -> tuple[str, ...]:
    configured = os.environ.get(DIRS_VAR, "")
    dirs = tuple(d for d in configured.split(":") if d)
    return dirs or SPEC_DIRS


def _unquote(text: str) -> str:
    text = text.split(" #", 1)[0].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _yaml_facts(text: str) -> tuple[str | None, list[str]]:
    """kind and device names from a CDI spec's block YAML (module docstring)."""
    kind, devices = None, []
    in_devices = False
    item_indent = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "---":
            continue
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if indent == 0 and not (in_devices and body.startswith("- ")):  # YAML may leave a list unindented
            in_devices = body.split(":", 1)[0] == "devices"
            if body.startswith("kind:"):
                kind = _unquote(body[len("kind:") :])
            item_indent = None
            continue
        if not in_devices:
            continue
        if body.startswith("- "):
            if item_indent is None:
                item_indent = indent
            if indent == item_indent:
                entry = body[2:].strip()
                if entry.startswith("name:"):
                    devices.append(_unquote(entry[len("name:") :]))
                continue
        if item_indent is not None and indent == item_indent + 2 and body.startswith("name:"):
            devices.append(_unquote(body[len("name:") :]))
    return kind, devices


def read_spec(path: str) -> CdiSpec:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        return CdiSpec(path=path, kind=None, devices=(), problem=f"cannot be read: {exc.strerror or exc}")
    if len(data) > MAX_SPEC_BYTES:
        return CdiSpec(path=path, kind=None, devices=(), problem=f"is over {MAX_SPEC_BYTES} bytes")
    text = data.decode("utf-8", "replace")
    if path.endswith(".json"):
        try:
            document = json.loads(text)
        except ValueError as exc:
            return CdiSpec(path=path, kind=None, devices=(), problem=f"is not JSON: {exc}")
        if not isinstance(document, dict):
            return CdiSpec(path=path, kind=None, devices=(), problem="is not a CDI spec (not an object)")
        kind = document.get("kind") if isinstance(document.get("kind"), str) else None
        items = document.get("devices") if isinstance(document.get("devices"), list) else []
        devices = [d["name"] for d in items if isinstance(d, dict) and isinstance(d.get("name"), str)]
    else:
        kind, devices = _yaml_facts(text)
    if kind is None:
        return CdiSpec(path=path, kind=None, devices=(), problem="names no kind: not a CDI spec")
    return CdiSpec(path=path, kind=kind, devices=tuple(devices[:MAX_DEVICES]), problem=None)


def find_specs(dirs: tuple[str, ...] | None = None) -> list[CdiSpec]:
    """Every .yaml, .yml and .json file of the spec directories, in order (a missing directory is none)."""
    found: list[CdiSpec] = []
    for directory in dirs if dirs is not None else spec_dirs():
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.endswith((".yaml", ".yml", ".json")) and len(found) < MAX_SPECS:
                found.append(read_spec(os.path.join(directory, name)))
    return found


def gpu_devices(specs: list[CdiSpec]) -> list[str]:
    """The nvidia.com/gpu device names the specs define ("0", "all", ...)."""
    return [device for spec in specs if spec.kind == GPU_KIND for device in spec.devices]


def gpu_path(access: str, specs: list[CdiSpec] | None = None) -> str | None:
    """Which path a GPU smoke step takes: "cdi" or "legacy"; None when `cdi` was asked for and no spec
    names nvidia.com/gpu=all (the caller fails with NO_SPEC). `auto` takes CDI when a spec offers it."""
    if access == "legacy":
        return "legacy"
    devices = gpu_devices(find_specs() if specs is None else specs)
    if "all" in devices:
        return "cdi"
    return None if access == "cdi" else "legacy"
