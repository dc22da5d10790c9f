"""A `docker buildx bake` file for a spec: every target's rendered context built as a candidate.

Each target's context (`envbuild render` writes `<out>/<target>/`) is built as a *candidate*
(`<repository>:candidate-<target>`): the image is a candidate until `envbuild verify` has run its
smoke step, and only `envbuild promote` gives it the spec's tags.

Every bake target names its `platforms` (plan.builds, the list render and build share). A spec target with
several platforms has one context per platform (`<out>/<target>/<arch>/`: the lock's hashes, the base
image digest and the uv binary differ), so it becomes one bake target per platform, `<target>-<arch>`,
each with its own candidate tag (`candidate-<target>-<arch>`): every platform is verified on its own,
and `envbuild promote A@sha256:.. B@sha256:.. --to TAG` then pushes the multi-platform index. One bake
target with two platforms would need one context valid for both, which a hash-checked lock is not.

Every target also asks BuildKit for its own attestations (ATTEST): an SBOM of the image's files and
SLSA provenance in max mode (the build's full parameters). They sit beside envbuild's GPU-aware SBOM
and provenance (envbuild.attest), which know the lock, CUDA and the smoke report; BuildKit's know the
files and the build. BuildKit attaches them only when it exports to a registry (`--push`, as
bake_command does) or an OCI archive; the default `docker` driver refuses them unless the Engine uses
the containerd image store, so bake on a docker-container (or remote/kubernetes) builder:
https://docs.docker.com/build/attestations/ and https://github.com/docker/buildx/pull/1988.

Bake's JSON form and attribute names follow the Bake file reference:
https://docs.docker.com/build/bake/reference/
(BAKE_SCHEMA below is written from that page: the document publishes no JSON Schema of its own.)
"""

from __future__ import annotations

import json
import os
import re
import shlex

from envbuild._util.outputs import check_output, write_output
from envbuild.errors import UsageError
from envbuild.lockfile.model import Lock
from envbuild.matrix.model import Matrix
from envbuild.matrix.platforms import short
from envbuild.plan.builds import builds
from envbuild.plan.plan import build_plan
from envbuild.spec.model import Spec

# Bake's `attest` attribute: the `--attest` flag's inline strings, one per attestation
# (https://docs.docker.com/build/bake/reference/#targetattest; mode=max:
# https://docs.docker.com/build/attestations/slsa-provenance/#mode)
ATTEST = ("type=sbom", "type=provenance,mode=max")

_BAKE_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")

_STRING_LIST = {"type": "array", "items": {"type": "string"}}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_NULLABLE_STRING_MAP = {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
# ssh, secret, output, cache-to, cache-from, attest and annotations are "composable": each item is the
# build flag's inline string (type=registry,ref=...) or, in newer buildx, the same thing as an object.
_COMPOSABLE_LIST = {"type": "array", "items": {"type": ["string", "object"]}}

BAKE_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$comment": "Written from https://docs.docker.com/build/bake/reference/ (JSON form of a Bake file).",
    "title": "docker buildx bake file, JSON form (the blocks and target attributes Bake documents)",
    "type": "object",
    "properties": {
        "group": {
            "type": "object",
            "propertyNames": {"pattern": _BAKE_NAME_RE.pattern},
            "additionalProperties": {"$ref": "#/$defs/group"},
        },
        "target": {
            "type": "object",
            "propertyNames": {"pattern": _BAKE_NAME_RE.pattern},
            "additionalProperties": {"$ref": "#/$defs/target"},
        },
        "variable": {"type": "object", "additionalProperties": {"type": "object"}},
        "function": {"type": "object", "additionalProperties": {"type": "object"}},
    },
    "additionalProperties": False,
    "$defs": {
        "group": {
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "targets": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            "required": ["targets"],
            "additionalProperties": False,
        },
        "target": {
            "type": "object",
            "properties": {
                "args": _NULLABLE_STRING_MAP,  # null: use the Dockerfile's ARG default
                "annotations": _COMPOSABLE_LIST,
                "attest": _COMPOSABLE_LIST,
                "cache-from": _COMPOSABLE_LIST,
                "cache-to": _COMPOSABLE_LIST,
                "call": {"type": "string"},
                "context": {"type": "string"},
                "contexts": _STRING_MAP,
                "description": {"type": "string"},
                "dockerfile-inline": {"type": "string"},
                "dockerfile": {"type": "string"},
                "entitlements": _STRING_LIST,
                "extra-hosts": _STRING_MAP,
                "inherits": _STRING_LIST,
                "labels": _NULLABLE_STRING_MAP,
                "matrix": {"type": "object"},
                "name": {"type": "string"},
                "network": {"type": "string"},
                "no-cache-filter": _STRING_LIST,
                "no-cache": {"type": "boolean"},
                "output": _COMPOSABLE_LIST,
                "platforms": _STRING_LIST,
                "pull": {"type": "boolean"},
                "secret": _COMPOSABLE_LIST,
                "shm-size": {"type": "string"},
                "ssh": _COMPOSABLE_LIST,
                "tags": _STRING_LIST,
                "target": {"type": "string"},
                "ulimits": _STRING_LIST,
            },
            "additionalProperties": False,
        },
    },
}


def bake_target_name(name: str) -> str:
    """A spec target name as a bake target name (^[a-zA-Z0-9_-]+$): other characters become "-"."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", name)


def candidate_tag(repository: str, target: str, platform: str | None = None) -> str:
    """Where a built, not yet verified image lives: `envbuild verify` finds it by this ref. `platform`:
    one platform's candidate of a target with several (candidate-<target>-<arch>)."""
    suffix = f"-{short(platform)}" if platform else ""
    return f"{repository}:candidate-{target}{suffix}"


def bake_names(spec: Spec, matrix: Matrix) -> dict[str, str]:
    """Spec target name -> its bake target name; with several platforms, each platform's bake name
    (`<name>-<arch>`) must be free too, so it is checked against every other target's."""
    names: dict[str, str] = {}
    taken: dict[str, str] = {}
    for build in builds(matrix, spec):
        name = build.target.name
        bake = bake_target_name(name) + build.suffix
        if taken.get(bake, name) != name:
            raise UsageError(
                f"{spec.path}: targets {taken[bake]!r} and {name!r} are both {bake!r} as bake "
                "targets (bake allows only letters, digits, _ and -; a target with several platforms "
                "is one bake target per platform, <name>-<arch>)",
                fix="rename one of the [[target]]s",
            )
        taken[bake] = name
        names[name] = bake_target_name(name)
    return names


def bake_file(
    matrix: Matrix,
    spec: Spec,
    *,
    out_dir: str = "build",
    cache_ref: str | None = None,
    lock: Lock | None = None,
) -> dict:
    """The bake definition (JSON form) that builds every target's rendered context as a candidate.

    cache_ref: one registry cache ref for every target; default `<repository>:buildcache-<target>`.
    lock: an envbuild.lock (`envbuild.lockfile.read.load_lock`) so the labels name the pinned base image, as
    the rendered Dockerfile does.
    """
    repository = spec.image.repository
    names = bake_names(spec, matrix)
    targets: dict[str, dict] = {}
    for build in builds(matrix, spec, lock):  # render's rule: each platform with its own lock entry
        name = build.target.name
        plan = build_plan(matrix, spec, build.target, lock=build.locked, platform=build.platform)
        cache = cache_ref or f"{repository}:buildcache-{build.key}"
        targets[names[name] + build.suffix] = {
            "context": build.context_dir(out_dir).replace(os.sep, "/"),
            "dockerfile": "Dockerfile",
            "tags": [candidate_tag(repository, name, build.platform if build.one_of_several else None)],
            "labels": dict(plan.labels),
            "cache-from": [f"type=registry,ref={cache}"],
            "cache-to": [f"type=registry,ref={cache},mode=max"],
            "platforms": [build.platform],
            "attest": list(ATTEST),
        }
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}


def bake_json(
    matrix: Matrix,
    spec: Spec,
    *,
    out_dir: str = "build",
    cache_ref: str | None = None,
    lock: Lock | None = None,
) -> str:
    """bake_file as docker-bake.json text: sorted keys, so the same inputs give the same bytes."""
    document = bake_file(matrix, spec, out_dir=out_dir, cache_ref=cache_ref, lock=lock)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def missing_contexts(spec: Spec, contexts: str, matrix: Matrix) -> list[str]:
    """The targets' context directories under `contexts` (one per platform of a target with several)
    that hold no rendered Dockerfile."""
    directories = [build.context_dir(contexts) for build in builds(matrix, spec)]
    return [d for d in directories if not os.path.isfile(os.path.join(d, "Dockerfile"))]


def write_bake_file(
    matrix: Matrix, spec: Spec, path: str, *, contexts: str = "build", spec_path: str | None = None
) -> None:
    """`envbuild bake`: docker-bake.json for every target's context under `contexts`.

    `path` must name a file in an existing directory: anything else is a UsageError naming it. Every
    target's context must be rendered already: a bake file whose contexts do not exist would only
    fail later, inside `docker buildx bake`, far from the cause; nothing is written then.
    """
    check_output(path, default_name="docker-bake.json")
    missing = missing_contexts(spec, contexts, matrix)
    if missing:
        spec_arg = f" -f {shlex.quote(spec_path)}" if spec_path else ""
        raise UsageError(
            f"--contexts {contexts}: no rendered context (Dockerfile) in {', '.join(missing)}",
            fix=f"run `envbuild render{spec_arg} -o {shlex.quote(contexts)}` first, or point --contexts "
            "at where render wrote them",
        )
    write_output(path, bake_json(matrix, spec, out_dir=contexts), default_name="docker-bake.json")


def bake_command(path: str) -> str:
    """The command that builds from the bake file at `path`, fit to paste into a shell."""
    return f"docker buildx bake -f {shlex.quote(path)} --push"
