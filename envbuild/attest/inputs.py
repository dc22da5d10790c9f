"""The build record's attestation inputs: what the provenance and the SBOM need beyond the stack.

Computed once, when the context is rendered, and kept in record.json (attest.fields.RECORD_INPUTS),
so the provenance is a pure function of the record: a CI job can rebuild it from the artifact alone.
The dependencies are the lock's (exact versions, every hash, the index) when the target is locked;
else the wheels the build context carries (the air-gapped wheelhouse: their hashes are what was
installed); else none, and the record says so by an empty list.
"""

from __future__ import annotations

import os
import time

from envbuild._util.files import file_sha256
from envbuild._util.record import TYPE_CHECKING

if TYPE_CHECKING:
    from envbuild.lockfile.model import LockedTarget
    from envbuild.plan.plan import Plan
    from envbuild.spec.model import Spec

WHEEL_LAYERS = ("framework", "user")  # the build context's wheels/<layer>/ folders (render.wheelhouse)


def now() -> str:
    """RFC 3339 UTC, to the second: SLSA's startedOn/finishedOn format."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def context_wheels(context_dir: str) -> dict[str, tuple[str, str, str]]:
    """{"sha256:<hex>": (file name, layer, canonical project name)} of the context's wheels."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    found: dict[str, tuple[str, str, str]] = {}
    for layer in WHEEL_LAYERS:
        folder = os.path.join(context_dir, "wheels", layer)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".whl"):
                continue
            try:
                project = str(parse_wheel_filename(name)[0])
            except InvalidWheelFilename:
                continue
            found.setdefault(file_sha256(os.path.join(folder, name)), (name, layer, project))
    return found


def dependencies(lock: LockedTarget | None, context_dir: str) -> list[dict]:
    """Every Python package the image installs, with its hashes: see the module docstring."""
    wheels = context_wheels(context_dir)
    if lock is not None:
        out = []
        for package in lock.packages:
            installed = next((h for h in package.hashes if h in wheels), None)
            out.append(
                {
                    "name": package.name,
                    "version": package.version,
                    "layer": package.layer,
                    "index": package.index,
                    "hashes": list(package.hashes),
                    "file": wheels[installed][0] if installed else None,
                    "file_hash": installed,
                }
            )
        return out
    from packaging.utils import parse_wheel_filename

    out = []
    for digest, (file, layer, project) in sorted(wheels.items(), key=lambda item: item[1]):
        out.append(
            {
                "name": project,
                "version": str(parse_wheel_filename(file)[1]),
                "layer": layer,
                "index": "wheelhouse",
                "hashes": [digest],
                "file": file,
                "file_hash": digest,
            }
        )
    return out


def record_inputs(spec: Spec, plan: Plan, lock: LockedTarget | None, context_dir: str) -> dict:
    """The record fields attest.fields.RECORD_INPUTS names, but the times (the pipeline's own)."""
    return {
        "spec": {"path": spec.path, "digest": "sha256:" + spec.digest},
        "base_image": plan.base_image,
        "nvidia_require_cuda": dict(plan.nvidia_env).get("NVIDIA_REQUIRE_CUDA"),
        "dependencies": dependencies(lock, context_dir),
    }
