"""reference/formats.md: the files envbuild writes that people and CI read, field by field.

Each table's rows come from the code that writes or reads the file, never from a list kept here:
record.json from its typed fields (envbuild.attest.record.FIELDS, with their meanings), the smoke
report from its JSON schema (envbuild/smoke/schema.json, with its descriptions), envbuild.lock from the
keys its reader accepts (envbuild.lockfile.read), and stack.json, bundle.json and the audit report
from documents the real writers produce here from the bundled examples and matrix. The meanings of
the last four are kept below, by field; a field the code writes that has none here, or one here the
code no longer writes, stops the docs build (DriftError), so the page cannot fall behind.
"""

from __future__ import annotations

import json
import os
from typing import Any

from docsgen import markdown as md

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}


class DriftError(Exception):
    """The code writes a field this page does not describe, or no longer writes one it does."""


# ---------------------------------------------------------------------------------------------
# walking a document: its fields as paths ("libraries[].path"), maps (keyed by GPU, package...) kept whole


def field_paths(document: Any, maps: frozenset[str], prefix: str = "") -> dict[str, set[str]]:
    """path -> the JSON types seen there, for every field of `document` (and of the items of its
    arrays of objects); a path in `maps` is a map whose keys are data, not fields: not walked."""
    found: dict[str, set[str]] = {}
    if isinstance(document, dict) and prefix not in maps:
        for key, value in document.items():
            path = f"{prefix}.{key}" if prefix else key
            found.setdefault(path, set()).add(json_type(value))
            for sub, kinds in field_paths(value, maps, path).items():
                found.setdefault(sub, set()).update(kinds)
    elif isinstance(document, list):
        for item in document:
            if isinstance(item, dict):
                for sub, kinds in field_paths(item, maps, prefix + "[]").items():
                    found.setdefault(sub, set()).update(kinds)
    return found


def json_type(value: Any) -> str:
    return "null" if value is None else JSON_TYPES[type(value)]


def merged(*documents: Any, maps: frozenset[str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for document in documents:
        for path, kinds in field_paths(document, maps).items():
            found.setdefault(path, set()).update(kinds)
    return found


def described_rows(name: str, found: dict[str, set[str]], meanings: dict[str, tuple[str, str]]) -> list:
    """The rows of a table whose fields the code produced (`found`) and whose meanings are kept here;
    DriftError when the two name different fields or a type disagrees with what was written."""
    missing = sorted(set(found) - set(meanings))
    stale = sorted(set(meanings) - set(found))
    if missing or stale:
        raise DriftError(
            f"{name}: the code writes fields the reference does not describe: {missing}; the reference "
            f"describes fields the code no longer writes: {stale} (docsgen/formats.py)"
        )
    rows = []
    for path, (kind, meaning) in meanings.items():
        seen = found[path] - {"null"}
        declared = {part.strip() for part in kind.replace(" or ", ",").split(",")}
        if seen - declared - {"integer" if "number" in declared else ""}:
            raise DriftError(f"{name}: {path} is written as {sorted(seen)}, described as {kind!r}")
        rows.append((md.code(path), md.text(kind), md.text(meaning)))
    return rows


# ---------------------------------------------------------------------------------------------
# record.json and the smoke report: described in the code itself


def record_section() -> str:
    from envbuild.attest.record import FIELDS

    rows = []
    for field in FIELDS:
        types = field.types if isinstance(field.types, tuple) else (field.types,)
        rows.append(
            (md.code(field.name), md.text(" or ".join(JSON_TYPES[t] for t in types)), md.text(field.meaning))
        )
    return (
        "## `record.json`: one target's build\n\n"
        "`envbuild build` writes `build/<target>/record.json` as the target goes through render, build, "
        "audit, verify and promote, and again when it ends; a target built for several platforms also has "
        "one per platform in `build/<target>/<arch>/`. `envbuild attest --attach --record` and the "
        "provenance read it back. A field that does not apply is absent (a target that failed in render "
        "has no `stack`), and any field may be `null`. Its fields, from `envbuild/attest/record.py`:\n\n"
        + md.table(("field", "type", "what it holds"), rows)
    )


def schema_type(schema: dict) -> str:
    kind = schema.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(kinds)
    if "enum" in schema:
        text += ": " + ", ".join(json.dumps(value) for value in schema["enum"])
    return text


def schema_rows(schema: dict, prefix: str = "") -> list:
    """One row per property of `schema`, then its nested properties (`devices[].name`)."""
    rows = []
    required = set(schema.get("required", ()))
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        shown = schema_type(sub)
        if name in required:
            shown += " (always)"
        rows.append((md.code(path), md.text(shown), md.text(sub.get("description", ""))))
        if "properties" in sub:
            rows += schema_rows(sub, path + ".")
        items = sub.get("items")
        if isinstance(items, dict) and "properties" in items:
            rows += schema_rows(items, path + "[].")
    return rows


def smoke_section() -> str:
    from envbuild.smoke.report import GATES, load_schema

    schema = load_schema()
    required = schema["properties"]["gates"].get("required", [])
    return (
        "## The smoke report\n\n"
        + md.text(schema.get("description", ""))
        + " `envbuild smoke --json` and `envbuild verify --json` print it, `verify --report FILE` keeps it "
        "(beside the image, the device and its digest), and record.json has it as `smoke`. It is checked "
        "against `envbuild/smoke/schema.json` ("
        + md.code(schema.get("$id", ""))
        + ") before envbuild trusts it; the fields, from that schema (*always*: in every report):\n\n"
        + md.table(("field", "type", "what it holds"), schema_rows(schema))
        + "\n`gates` has one entry per gate, each `passed`, `failed` or `skipped: <why>`: "
        + ", ".join(md.code(gate) for gate in GATES)
        + ". The schema requires each but "
        + ", ".join(md.code(gate) for gate in GATES if gate not in required)
        + ".\n"
    )


# ---------------------------------------------------------------------------------------------
# stack.json: written by render, and record.json's stack

STACK_MAPS = frozenset({"toolchain"})
STACK_FIELDS: dict[str, tuple[str, str]] = {
    "framework": ("string", "torch, tensorflow or jax"),
    "framework_version": ("string", "the framework release"),
    "variant": ("string", "the release's CUDA build (cu124, cuda12, ...)"),
    "cuda": ("string", "the CUDA runtime X.Y"),
    "cudnn": ("string", "the cuDNN the build uses; null when the matrix does not say"),
    "cudnn_pin": (
        "string",
        "the cuDNN X.Y the install is pinned to when a GPU narrowed its range; null: none",
    ),
    "nccl": ("string", "the NCCL the build uses; null when the matrix does not say"),
    "python": ("string", "the Python X.Y of the image"),
    "min_driver": (
        "string",
        "the NVIDIA driver the image needs at least (native, or the minor-version floor)",
    ),
    "index_url": ("string", "the index the framework is installed from"),
    "pins": ("array", "the nvidia-* pins the install adds to keep CUDA at the stack's X.Y"),
    "install": ("string", "the pip command that installs this stack"),
    "compat": ("string", "how the driver runs its CUDA: native, or minor-version compatibility"),
    "cuda_from": ("string", "where the framework build expects CUDA: wheels (its own), or system"),
    "extra": ("string", "the pip extra that brings CUDA (and-cuda, cuda12); null: none"),
    "pypi_default": ("boolean", "whether a plain `pip install` from PyPI gets this variant"),
    "arch": ("string", "the GPU architectures the build has kernels for on this platform (8.0;9.0)"),
    "arch_source": ("string", "the wheel that arch list was measured from; null: the matrix row's source"),
    "toolchain": ("object", "tool wheels pinned to their own bound above cuda (JAX's ptxas): package -> pin"),
    "requirements_source": (
        "string",
        "the wheel whose METADATA the pins were held to; null: not measured",
    ),
    "caveats": ("array", "what the matrix says is unconfirmed about this row"),
    "target": ("string", "the target it was rendered for"),
    "strategy": ("string", "wheels, base-image or conda"),
    "os": ("string", "the base OS"),
    "base_image": ("string", "the FROM image"),
    "tags": ("array", "the tags a verified image gets"),
    "spec_digest": ("string", "sha256 of envbuild.toml less [mirrors] and [site]"),
    "matrix_digest": ("string", "sha256 of the matrix the stack was resolved from"),
    "envbuild": ("string", "the envbuild version that rendered it"),
    "cuda_libraries": ("object", "which copy of the CUDA libraries the framework loads"),
    "cuda_libraries.loaded_from": ("string", "framework-wheels, base-image or conda-env"),
    "cuda_libraries.path": ("string", "where that copy is (site-packages/nvidia/*/lib)"),
    "cuda_libraries.why": ("string", "how the framework finds it, with the source of each fact"),
    "base_flavor": ("object", "strategy base-image: the nvidia/cuda flavor chosen and why; null otherwise"),
    "base_flavor.flavor": ("string", "the flavor: base, cudnn-runtime, ..."),
    "base_flavor.image": ("string", "the nvidia/cuda image of that flavor"),
    "base_flavor.instead_of": ("string", "the larger image it replaces (torch: cudnn-runtime); null: none"),
    "base_flavor.why": ("string", "why that flavor is the smallest that has what the framework loads"),
    "base_flavor.overridden_by": ("string", "the image --base-image (or [site] base-image) put in its place"),
}


def stack_documents() -> list[dict]:
    """stack.json as render writes it, for the bundled examples (every strategy), one with its base
    image replaced."""
    from envbuild.matrix.load import load_matrix
    from envbuild.plan.plan import build_plan
    from envbuild.spec.model import load_spec

    matrix = load_matrix()
    documents = []
    for example in ("torch-wheels", "tensorflow-base-image", "jax-conda"):
        spec = load_spec(os.path.join(ROOT, "examples", example, "envbuild.toml"))
        target = spec.targets[0]
        documents.append(build_plan(matrix, spec, target).stack_document)
        if target.stack.strategy == "base-image":
            replaced = "registry.internal/nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"
            documents.append(build_plan(matrix, spec, target, base_image=replaced).stack_document)
    return documents


def resolve_stack_fields() -> list[str]:
    """The fields of a stack in `envbuild resolve --json` (the resolver's part of stack.json)."""
    from envbuild.matrix.load import load_matrix
    from envbuild.resolve.query import build_query
    from envbuild.resolve.report import to_json
    from envbuild.resolve.solver import resolve

    matrix = load_matrix()
    query = build_query(
        matrix,
        driver="550",
        gpus=[],
        frameworks=[],
        python=None,
        cuda=None,
        compat="native",
        limit=None,
        strategy=None,
        os=None,
        platform=None,
    )
    return list(json.loads(to_json(resolve(matrix, query), matrix))["stacks"][0])


def stack_section() -> str:
    found = merged(*stack_documents(), maps=STACK_MAPS)
    resolver = resolve_stack_fields()
    if list(STACK_FIELDS)[: len(resolver)] != resolver:
        raise DriftError(
            f"stack.json: resolve --json's stacks have {resolver}: list them first in STACK_FIELDS"
        )
    return (
        "## `stack.json`: the resolved stack\n\n"
        "`envbuild render` writes it into each build context (`build/<target>/stack.json`) and record.json "
        f"carries it as `stack`; `envbuild resolve --json` lists each stack with its first {len(resolver)} "
        f"fields ({md.code(resolver[0])} to {md.code(resolver[-1])}), the resolver's; render adds the "
        "others. Its fields, from the stack documents render makes for the bundled examples:\n\n"
        + md.table(("field", "type", "what it holds"), described_rows("stack.json", found, STACK_FIELDS))
    )


# ---------------------------------------------------------------------------------------------
# envbuild.lock: the keys its reader accepts

LOCK_TABLES = (
    ("top level", "", "TOP_KEYS"),
    ("[[mirror]]", "mirror.", "MIRROR_KEYS"),
    ("[[target]]", "target.", "TARGET_KEYS"),
    ("[target.stack]", "target.stack.", "STACK_KEYS"),
    ("[[target.package]]", "target.package.", "PACKAGE_KEYS"),
    ("[[target.conda]]", "target.conda.", "CONDA_KEYS"),
)
LOCK_FIELDS: dict[str, tuple[str, str]] = {
    "lock-version": ("integer", "the format's version: 1"),
    "envbuild": ("string", "the envbuild version that wrote the lock"),
    "content-digest": (
        "string",
        '"sha256:<hex>" of everything below the seal lines: an edit made without envbuild fails it',
    ),
    "content-hmac": (
        "string",
        '"hmac-sha256:<hex>" of the same, keyed (`--lock-key-file`, ENVBUILD_LOCK_KEY); only in keyed locks',
    ),
    "spec-digest": ("string", '"sha256:<hex>" of envbuild.toml less [mirrors] and [site]'),
    "matrix-digest": ("string", '"sha256:<hex>" of the matrix the stacks were resolved from'),
    "mirror": ("array of tables", "the [mirrors] entries the lock was made through; absent without mirrors"),
    "mirror.source": ("string", "the canonical source prefix"),
    "mirror.mirror": ("string", "the mirror that stood in for it"),
    "target": ("array of tables", "one per target and platform"),
    "target.name": ("string", "the target"),
    "target.platform": ("string", "linux/arm64; absent for linux/amd64"),
    "target.strategy": ("string", "wheels, base-image or conda"),
    "target.python": ("string", "the Python X.Y"),
    "target.base-image": ("string", "the base image, name:tag@sha256:... (this platform's own manifest)"),
    "target.requirements": (
        "array of strings",
        "what was resolved: the framework requirement(s), then [packages] pip",
    ),
    "target.stack": ("table", "the stack facts the lock was made for"),
    "target.package": ("array of tables", "the locked Python closure, one per package"),
    "target.conda": ("array of tables", "strategy conda: the solved conda packages, framework layer first"),
    "target.stack.framework": ("string", "torch, tensorflow or jax"),
    "target.stack.framework_version": ("string", "the framework release"),
    "target.stack.variant": ("string", "the release's CUDA build"),
    "target.stack.cuda": ("string", "the CUDA runtime X.Y"),
    "target.stack.cudnn": ("string", "the cuDNN version"),
    "target.stack.nccl": ("string", "the NCCL version"),
    "target.stack.min_driver": ("string", "the driver floor"),
    "target.stack.compat": ("string", "native or minor-version"),
    "target.stack.index_url": ("string", "the framework's index"),
    "target.stack.os": ("string", "the base OS"),
    "target.stack.arch": ("string", "the GPU architectures of the build"),
    "target.stack.cuda_from": ("string", "wheels or system"),
    "target.package.name": ("string", "the package"),
    "target.package.version": ("string", "its exact version"),
    "target.package.layer": ("string", "framework or user: the image layer it is installed in"),
    "target.package.index": ("string", "the index it was locked from (canonical, never a mirror's)"),
    "target.package.hashes": ("array of strings", '"sha256:<hex>" of each file pip may install'),
    "target.conda.name": ("string", "the package"),
    "target.conda.version": ("string", "its version"),
    "target.conda.build": ("string", "its build string"),
    "target.conda.layer": ("string", "framework or user"),
    "target.conda.channel": ("string", "the channel it was solved from"),
    "target.conda.subdir": ("string", "linux-64, linux-aarch64 or noarch"),
    "target.conda.url": ("string", "the package file micromamba installs"),
    "target.conda.sha256": ("string", '"sha256:<hex>" of that file, checked as it is installed'),
}


def lock_section() -> str:
    from envbuild.lockfile import read

    rows = []
    for table, prefix, name in LOCK_TABLES:
        for key in getattr(read, name):
            path = prefix + key
            if path not in LOCK_FIELDS:
                raise DriftError(
                    f"envbuild.lock: its reader accepts {table} {key}, which docsgen/formats.py does not "
                    "describe"
                )
            kind, meaning = LOCK_FIELDS[path]
            shown = key.replace("_", "-") if table == "[target.stack]" else key
            rows.append(
                (
                    md.code(table) if table != "top level" else "top level",
                    md.code(shown),
                    md.text(kind),
                    md.text(meaning),
                )
            )
    described = {f"{prefix}{key}" for _, prefix, name in LOCK_TABLES for key in getattr(read, name)}
    stale = sorted(set(LOCK_FIELDS) - described)
    if stale:
        raise DriftError(
            f"envbuild.lock: docsgen/formats.py describes keys its reader no longer accepts: {stale}"
        )
    return (
        "## `envbuild.lock`\n\n"
        "TOML, written by `envbuild lock` next to envbuild.toml, sorted and byte-stable, committed by the "
        "team; `envbuild lock --check` fails CI when the spec or the matrix changed without relocking. "
        "Its reader refuses any key it does not know. The keys, from `envbuild/lockfile/read.py`:\n\n"
        + md.table(("table", "key", "type", "what it holds"), rows)
    )


# ---------------------------------------------------------------------------------------------
# bundle.json: `envbuild vendor`'s manifest

BUNDLE_FIELDS: dict[str, tuple[str, str]] = {
    "bundle-version": ("integer", "the format's version: 1"),
    "envbuild": ("string", "the envbuild version that made the bundle"),
    "lock-digest": ("string", "the digest of the envbuild.lock the bundle was made from"),
    "targets": ("array", "one per locked target and platform"),
    "targets[].name": ("string", "the target"),
    "targets[].platform": ("string", "its platform"),
    "targets[].base-image": ("string", "its base image by digest, stored in the bundle's OCI layout"),
    "files": ("array", "every file in the bundle, by path"),
    "files[].path": (
        "string",
        "relative to the bundle: wheels/<name>.whl, conda/<subdir>/<file>, oci/blobs/sha256/<hex>",
    ),
    "files[].kind": ("string", "wheel, uv, conda or blob"),
    "files[].sha256": ("string", "64 hex: checked when the file is fetched and when the bundle is read"),
    "files[].size": ("integer", "bytes"),
    "files[].source": ("string", "the canonical URL or image reference it came from"),
}


def bundle_document() -> dict:
    from envbuild.vendor import manifest

    sample = manifest.Manifest(
        envbuild="0",
        lock_digest="sha256:" + "0" * 64,
        targets=(manifest.BundleTarget(name="default", platform="linux/amd64", base_image="ubuntu:22.04"),),
        files=(
            manifest.BundleFile(
                path="wheels/x.whl", kind="wheel", sha256="0" * 64, size=1, source="https://x"
            ),
        ),
    )
    return json.loads(manifest.dumps(sample))


def bundle_section() -> str:
    from envbuild.vendor.manifest import KINDS, MANIFEST_NAME

    found = field_paths(bundle_document(), frozenset())
    return (
        f"## `{MANIFEST_NAME}`: an air-gapped bundle's manifest\n\n"
        "`envbuild vendor` writes it last, into the bundle directory, listing every file it fetched for "
        "the lock: "
        + ", ".join(md.code(kind) for kind in KINDS)
        + " files. `render --bundle`, `build --bundle` and "
        "`doctor --bundle` read it back as untrusted input. Its fields, from the manifest `envbuild/vendor/"
        "manifest.py` writes:\n\n"
        + md.table(("field", "type", "what it holds"), described_rows("bundle.json", found, BUNDLE_FIELDS))
    )


# ---------------------------------------------------------------------------------------------
# the audit report: `envbuild audit --json`

AUDIT_MAPS = frozenset({"libraries[].verdicts", "runs"})
AUDIT_FIELDS: dict[str, tuple[str, str]] = {
    "target": ("string", "what was audited: a file, a directory, a wheel or an image"),
    "framework": ("string", "whose libraries decide the result; null: none found"),
    "gpus": ("array", "the GPUs judged"),
    "gpus[].name": ("string", "as --gpu or the spec named it"),
    "gpus[].compute_capability": ("string", "X.Y"),
    "libraries": ("array", "each shared object with device code"),
    "libraries[].path": ("string", "its path in the target"),
    "libraries[].sass": ("array", "the SASS it carries: sm_80, sm_90a, ..."),
    "libraries[].ptx": ("array", "the PTX it carries: compute_90, ..."),
    "libraries[].counts": (
        "boolean",
        "whether it decides the result (the framework loads its kernels from it)",
    ),
    "libraries[].verdicts": (
        "object",
        "GPU name -> native, same-major, ptx-only or no-kernel-image; empty when skipped",
    ),
    "libraries[].read": ("string", "whole, partly or not read (cuobjdump stopped)"),
    "libraries[].unread": ("string", "why cuobjdump stopped, in its words; null: read whole"),
    "libraries[].skipped": (
        "string",
        "the reason it was not judged (--skip-audit, [audit] skip); null: judged",
    ),
    "unreadable": ("array", "libraries that decide the result and could not be read"),
    "unreadable[].library": ("string", "the library"),
    "unreadable[].error": ("string", "why"),
    "without_device_code": ("array", "shared objects with no device code"),
    "duplicates": ("array", "CUDA libraries present more than once"),
    "duplicates[].library": ("string", "the library (libcudart, ...)"),
    "duplicates[].component": ("string", "what it is (CUDA runtime, cuBLAS, ...)"),
    "duplicates[].copies": ("array", "each copy"),
    "duplicates[].copies[].path": ("string", "its path"),
    "duplicates[].copies[].bytes": ("integer", "its size"),
    "duplicates[].copies[].version": ("string", "its version; null: unknown"),
    "duplicates[].copies[].version_from": ("string", "where the version was read"),
    "duplicates[].copies[].loaded": ("boolean", "whether the framework loads this copy; null: unknown"),
    "duplicates[].wasted_bytes": ("integer", "the bytes of the copies not loaded"),
    "duplicate_bytes": ("integer", "all of those, together"),
    "skipped": ("array", "each library not judged"),
    "skipped[].library": ("string", "its file name"),
    "skipped[].reason": ("string", "why"),
    "skipped[].source": ("string", "--skip-audit or spec"),
    "skipped[].paths": ("array", "the libraries of the target it matched"),
    "warnings": ("array", "a skipped library the target does not have"),
    "ok": ("boolean", "whether every GPU has a kernel image in every library that decides"),
    "failures": ("array", "each GPU without a kernel image, per library"),
    "failures[].gpu": ("string", "the GPU"),
    "failures[].library": ("string", "the library"),
    "failures[].error": ("string", '"no kernel image is available for execution on the device"'),
    "framework_missing": ("boolean", "the framework has no library with device code (a CPU-only build)"),
    "runs": ("object", "GPU name -> whether the framework runs on it"),
}


def audit_documents() -> list[dict]:
    """`envbuild audit --json` of two made-up trees the real judge rules on: one passing with a
    partly read, a skipped and a duplicated library, one failing with an unreadable library."""
    from envbuild.audit.kernels import Kernels
    from envbuild.audit.report import to_document
    from envbuild.audit.skip import FLAG, SPEC, AuditSkip
    from envbuild.audit.tree import judge_tree
    from envbuild.matrix.load import load_matrix
    from envbuild.resolve.query import parse_gpu

    matrix = load_matrix()
    gpus = (parse_gpu("H100", matrix), parse_gpu("L4", matrix))

    def kernels(sass: tuple[str, ...], unread: str | None = None, size: int = 1) -> Kernels:
        return Kernels(sass=sass, ptx=("compute_90",) if sass else (), unread=unread, size=size)

    passing = judge_tree(
        {
            "torch/lib/libtorch_cuda.so": kernels(("sm_80", "sm_90")),
            "torch/lib/libc10_cuda.so": kernels(("sm_90",)),
            "nvidia/cublas/lib/libcublasLt.so.12": kernels(("sm_90",), unread="cuobjdump stopped"),
            "nvidia/cuda_runtime/lib/libcudart.so.12": kernels((), size=700_000),
            "usr/local/cuda/lib64/libcudart.so.12": kernels((), size=700_000),
        },
        gpus,
        target="image",
        framework="torch",
        skip=(
            AuditSkip(library="libc10_cuda.so", reason="why", source=SPEC),
            AuditSkip(library="libnone.so", reason="why", source=FLAG),
        ),
    )
    failing = judge_tree(
        {
            "torch/lib/libtorch_cuda.so": Kernels(sass=("sm_90",), ptx=(), unread=None, size=1),
            "torch/lib/libtorch_cuda_linalg.so": Kernels(sass=(), ptx=(), unread="not read", size=1),
        },
        gpus,
        target="image",
        framework="torch",
    )
    return [to_document(passing), to_document(failing)]


def audit_section() -> str:
    found = merged(*audit_documents(), maps=AUDIT_MAPS)
    return (
        "## The audit report\n\n"
        "What `envbuild audit TARGET --json` prints: the GPU kernels (SASS, PTX) compiled into each "
        "library of a file, wheel or image, and a verdict per GPU. Its fields, from documents the audit's "
        "own judge (`envbuild/audit/report.py`) makes here:\n\n"
        + md.table(
            ("field", "type", "what it holds"), described_rows("the audit report", found, AUDIT_FIELDS)
        )
    )


def page() -> str:
    sections = [
        record_section(),
        smoke_section(),
        stack_section(),
        lock_section(),
        bundle_section(),
        audit_section(),
    ]
    return (
        "# Records and reports\n\n"
        "The files envbuild writes that people and CI read, field by field, generated from the code that "
        "writes them each time this site is built. JSON files are written with sorted keys; a field shown "
        "as `a.b` is key `b` of object `a`, and `a[].b` is key `b` of each object in array `a`.\n\n"
        + "\n".join(sections)
    )
