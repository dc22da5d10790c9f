"""Load matrix/*.toml into the model (envbuild.matrix.model).

Parsing TOML in pure Python costs more than everything else `envbuild resolve` does, so a validated
parse is cached as JSON, keyed by the sha256 of the files' paths and bytes: the digest a lock records,
computed with CPython's own sha256 module (about 1 ms for the bundled matrix; hashlib would load
OpenSSL, 3 ms more). A forgeable key would let a hostile matrix directory poison the cache for the
genuine one (issue 33). Editing any file forces a fresh parse and check.
"""

from __future__ import annotations

import json
import os

from envbuild import __version__
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import MatrixError, UsageError
from envbuild.matrix.arch import parse_arch_list
from envbuild.matrix.gpufeatures import has_bf16, has_fp16
from envbuild.matrix.model import (
    FRAMEWORK_ORDER,
    Branch,
    CudaRelease,
    CudnnRelease,
    Framework,
    Gpu,
    Image,
    ImagePolicy,
    Matrix,
    MinorCompat,
    OperatingSystem,
    PlatformArch,
    Provenance,
    Release,
    Variant,
    remember_gpu_keys,
)
from envbuild.matrix.requirements import FILE as REQUIREMENTS_FILE
from envbuild.matrix.requirements import Requirements, build_requirements
from envbuild.matrix.versions import parse_driver_floor, parse_minor, parse_patch, release_key

if TYPE_CHECKING:
    from typing import Any

CACHE_FORMAT = 6  # 2: keyed by the files' sha256; 3: the stricter schema (index URLs, images, names);
# 4: GPU segment, late-SKU floor, precisions and memory; 5: per-platform arch lists (arch_by_platform);
# 6: the GPU name keys (gpus.toml's "keys")

# ---------------------------------------------------------------------------------------------
# locating and reading the files


def default_matrix_dir() -> str:
    """The packaged matrix in an installed wheel, else the checkout's top-level matrix/."""
    override = os.environ.get("ENVBUILD_MATRIX")
    if override:
        return override
    from envbuild._util.resources import data_dir

    return data_dir("matrix")


def _matrix_files(root: str) -> list[tuple[str, str]]:
    """(kind, path relative to root) of every data file, in a stable order."""
    files = [(kind, f"{kind}.toml") for kind in ("drivers", "cuda", "gpus", "os")]
    frameworks_dir = os.path.join(root, "frameworks")
    if os.path.isdir(frameworks_dir):
        for name in sorted(os.listdir(frameworks_dir)):
            if name.endswith(".toml"):
                files.append(("framework", f"frameworks/{name}"))
    # optional: a matrix without it has no measured requirements, and the rules fall back for all
    if os.path.lexists(os.path.join(root, REQUIREMENTS_FILE)):  # a FIFO or directory there is refused
        files.append(("requirements", REQUIREMENTS_FILE))
    return files


def cache_dir() -> str | None:
    """envbuild's cache directory: ENVBUILD_CACHE_DIR (empty: no cache), else
    $XDG_CACHE_HOME/envbuild or ~/.cache/envbuild."""
    configured = os.environ.get("ENVBUILD_CACHE_DIR")
    if configured is not None:
        return configured or None  # empty: no cache
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envbuild")


REQUIRED_FILES = ("drivers.toml", "cuda.toml", "gpus.toml", "os.toml", "frameworks/*.toml")


def _missing_files(root: str) -> list[str]:
    """The required files a matrix directory lacks: without frameworks/ every stack was rejected, and
    the user read "no compatible stack" for what is an incomplete directory (issue 33)."""
    missing = [name for name in REQUIRED_FILES[:4] if not os.path.lexists(os.path.join(root, name))]
    frameworks_dir = os.path.join(root, "frameworks")
    if not os.path.isdir(frameworks_dir):
        missing.append("frameworks/ (a directory of <framework>.toml files)")
    elif not any(name.endswith(".toml") for name in os.listdir(frameworks_dir)):
        missing.append("frameworks/*.toml (frameworks/ holds none)")
    return missing


def read_raw(root: str) -> tuple[str, dict[str, Any]]:
    """The matrix digest and the validated contents of every file, from cache when possible (a
    cached entry that does not build into a matrix is a miss: parsed afresh)."""
    digest, raw, cached = _read_raw(root)
    if cached:
        try:
            build_matrix(root, digest, raw)
        except _BROKEN_ENTRY:
            return digest, _fresh(root, digest)
    return digest, raw


# what a cache entry of the wrong shape raises when the model is built from it: any of these on a hit
# means a corrupt or tampered entry (a miss), never an internal error
_BROKEN_ENTRY = (KeyError, TypeError, AttributeError, ValueError, IndexError, UsageError)


def _read_blobs(root: str) -> list[tuple[str, str, bytes]]:
    """(kind, relative path, bytes) of every data file: regular files only, each at most
    limits.FILE_BYTES (a FIFO or /dev/zero as a matrix file hung or exhausted memory, issue 33)."""
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular

    # not a matrix at all (a file missing, a FIFO or a device in its place): bad input, exit 2 for every
    # command, as a DIR that does not exist is; `matrix check`'s exit 1 is for data with problems
    missing = _missing_files(root)
    if missing:
        raise UsageError(
            f"matrix directory {root} is missing {', '.join(missing)}",
            fix="point --matrix or ENVBUILD_MATRIX at a complete matrix (drivers.toml, cuda.toml, "
            "gpus.toml, os.toml and frameworks/*.toml: matrix/README.md), or restore the missing files",
        )
    blobs: list[tuple[str, str, bytes]] = []
    for kind, rel in _matrix_files(root):
        path = os.path.join(root, rel)
        try:
            data = read_regular(path, limit=limits.FILE_BYTES.get())
        except NotReadable as exc:
            raise UsageError(
                f"matrix file {path} is {exc}" if str(exc).startswith("a ") else f"matrix file {path}: {exc}",
                fix="a matrix file is a regular TOML file (matrix/README.md); restore it",
            ) from None
        except OSError as exc:
            raise MatrixError(
                f"cannot read {path}: {exc.strerror or exc}",
                fix="restore the file from the envbuild checkout or package",
            ) from None
        blobs.append((kind, rel, data))
    return blobs


def _fresh(root: str, digest: str) -> dict[str, Any]:
    """Parse and validate afresh (a cache entry was broken), and replace the entry."""
    raw = _parse_and_validate(_read_blobs(root))
    cache_file = _cache_file(digest)
    if cache_file is not None:
        _write_cache(cache_file, {"digest": digest, "files": raw})
    return raw


def _cache_file(digest: str) -> str | None:
    cache = cache_dir()
    return os.path.join(cache, f"matrix-{CACHE_FORMAT}-{__version__}-{digest}.json") if cache else None


def _cached_files(cache_file: str, digest: str, blobs: list[tuple[str, str, bytes]]) -> dict | None:
    """The entry's files when it names this digest and holds every file of this matrix, each as
    {"kind", "data": {...}}; None (a miss) for anything else: missing, unreadable, not JSON, or of
    another shape."""
    from envbuild._util import limits
    from envbuild._util.files import NotReadable, read_regular

    try:
        cached = parse_json(read_regular(cache_file, limit=limits.FILE_BYTES.get()))
    except (OSError, ValueError, NotReadable):
        return None
    if not isinstance(cached, dict) or cached.get("digest") != digest:
        return None
    files = cached.get("files")
    if not isinstance(files, dict) or set(files) != {rel for _, rel, _ in blobs}:
        return None
    for kind, rel, _ in blobs:
        entry = files[rel]
        if not (
            isinstance(entry, dict) and entry.get("kind") == kind and isinstance(entry.get("data"), dict)
        ):
            return None
    return files


def _read_raw(root: str) -> tuple[str, dict[str, Any], bool]:
    """(digest, validated contents, whether they came from the cache)."""
    if not os.path.isdir(root):  # a wrong path is bad input (exit 2) for every command, `matrix check` too
        missing = not os.path.exists(root)
        what = f"matrix directory {root} does not exist" if missing else f"{root} is not a directory"
        raise UsageError(
            what,
            fix="point --matrix or ENVBUILD_MATRIX at a folder holding drivers.toml, "
            "cuda.toml, gpus.toml and frameworks/*.toml",
        )
    blobs = _read_blobs(root)
    # the cache is content-addressed: keyed by the sha256 the lock records as the matrix digest, and a
    # hit must name that digest. A key of checksums (crc32 + adler32, before issue 33) can be forged: a
    # hostile matrix directory with the bundled one's key poisoned the cache for the genuine matrix
    digest = content_digest(blobs)
    cache_file = _cache_file(digest)
    if cache_file is not None:
        files = _cached_files(cache_file, digest, blobs)
        if files is not None:
            return digest, files, True

    raw = _parse_and_validate(blobs)
    if cache_file is not None:
        _write_cache(cache_file, {"digest": digest, "files": raw})
    return digest, raw, False


def content_digest(blobs: list[tuple[str, str, bytes]]) -> str:
    """sha256 over every file's relative path and bytes: what a lock records as the matrix digest, and
    the cache's key. The C module behind hashlib's sha256, where there is one: hashlib itself loads
    OpenSSL, 3 ms of every `envbuild resolve`, for the 1 ms this hash takes."""
    try:
        from _sha256 import sha256  # CPython 3.10, 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12 and later
        except ImportError:
            from hashlib import sha256

    hasher = sha256()
    for _, rel, data in blobs:
        hasher.update(rel.encode() + b"\0" + data + b"\0")
    return hasher.hexdigest()


def _parse_and_validate(blobs: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    from envbuild._util import toml as _toml
    from envbuild.matrix.schema import validate_file

    raw: dict[str, Any] = {}
    errors: list[str] = []
    for kind, rel, data in blobs:
        try:
            parsed = _toml.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, _toml.TOMLDecodeError) as exc:
            errors.append(f"{rel}: not valid TOML: {exc}")
            continue
        errors += validate_file(kind, rel, parsed)
        raw[rel] = {"kind": kind, "data": parsed}
    if not errors:
        _add_gpu_keys(raw)
    if errors:
        shown = "\n  ".join(errors[:25])
        more = f"\n  ... and {len(errors) - 25} more" if len(errors) > 25 else ""
        raise MatrixError(
            f"the compatibility matrix does not validate:\n  {shown}{more}",
            fix="correct the rows named above (schema: matrix/README.md)",
        )
    return raw


def _add_gpu_keys(raw: dict[str, Any]) -> None:
    """gpus.toml's entry gains "keys": each row's name and alias keys, space-separated, one line per
    row in file order. Keying hundreds of rows through the name normaliser costs milliseconds;
    stored in the cache entry, a cached load keys no name (issue 34 item 9). One string rather than
    a JSON object, because every `envbuild resolve` parses the entry and a string decodes for free:
    the split into an index happens only when a name is looked up."""
    from envbuild.matrix.gpunames import name_key

    for entry in raw.values():
        if entry["kind"] == "gpus":
            lines = []
            for row in entry["data"].get("gpu", ()):
                keys = dict.fromkeys(name_key(label) for label in (row["name"], *row.get("aliases", ())))
                lines.append(" ".join(k for k in keys if k))
            entry["keys"] = "\n".join(lines)


def _remember_gpu_keys(gpus: tuple[Gpu, ...], keys: object) -> None:
    """The cached keys, for the rows' index on first use (model.gpu_index checks them then)."""
    if isinstance(keys, str):
        remember_gpu_keys(gpus, keys)


def _write_cache(cache_file: str, content: dict[str, Any]) -> None:
    """Atomic, best effort: a read-only home or a full disk only costs speed."""
    import contextlib

    from envbuild._util.files import write_atomic  # only on a cache miss, off the resolve start-up path

    with contextlib.suppress(OSError):
        write_atomic(cache_file, json.dumps(content, separators=(",", ":")))


# ---------------------------------------------------------------------------------------------
# building the model


def _prov(rel: str, where: str, row: dict[str, Any]) -> Provenance:
    return Provenance(
        where=f"{rel} {where}", source=row["source"], confidence=row.get("confidence"), note=row.get("note")
    )


def load_matrix(root: str | os.PathLike[str] | None = None) -> Matrix:
    root = os.fspath(root) if root is not None else default_matrix_dir()
    digest, raw, cached = _read_raw(root)
    if cached:
        try:
            return build_matrix(root, digest, raw)
        except _BROKEN_ENTRY:  # a corrupt or tampered cache entry: a miss
            raw = _fresh(root, digest)
    return build_matrix(root, digest, raw)


def build_matrix(root: str, digest: str, raw: dict[str, Any]) -> Matrix:
    """The model from `read_raw`'s validated contents (for callers that also need the raw rows)."""
    cuda: list[CudaRelease] = []
    minor_compat: dict[int, MinorCompat] = {}
    branches: dict[int, Branch] = {}
    gpus: list[Gpu] = []
    frameworks: list[Framework] = []
    images: list[Image] = []
    cudnn: list[CudnnRelease] = []
    oses: dict[str, OperatingSystem] = {}
    image_policy: ImagePolicy | None = None
    requirement_rows: dict[tuple[str, str, str], Requirements] = {}
    gpu_keys: object = None
    for rel, entry in raw.items():
        data = entry["data"]
        kind = entry["kind"]
        if kind == "drivers":
            for row in data["cuda"]:
                floor = row.get("min_driver")
                cuda.append(
                    CudaRelease(
                        version=parse_patch(row["version"]),
                        label=row["label"],
                        ga=row.get("ga", False),
                        min_driver=parse_driver_floor(floor) if floor else None,
                        prov=_prov(rel, f"[[cuda]] {row['version']}", row),
                    )
                )
            for row in data["minor_compat"]:
                minor_compat[row["cuda_major"]] = MinorCompat(
                    cuda_major=row["cuda_major"],
                    min_driver=parse_driver_floor(row["min_driver"]),
                    prov=_prov(rel, f"[[minor_compat]] {row['cuda_major']}", row),
                )
            for row in data["branch"]:
                branches[row["branch"]] = Branch(
                    branch=row["branch"],
                    native_cuda=parse_minor(row["native_cuda"]),
                    type=row["type"],
                    eol=row.get("eol"),
                    prov=_prov(rel, f"[[branch]] R{row['branch']}", row),
                )
        elif kind == "cuda":
            for row in data["cudnn"]:
                ranges = tuple(tuple(parse_minor(p) for p in r.split("-")) for r in row["cuda"])
                min_cc = row.get("min_compute_capability")
                cudnn.append(
                    CudnnRelease(
                        version=parse_minor(row["version"]),
                        cuda=ranges,
                        min_cc=parse_minor(min_cc) if min_cc else None,
                        prov=_prov(rel, f"[[cudnn]] {row['version']}", row),
                    )
                )
            for row in data["image"]:
                images.append(
                    Image(
                        cuda=parse_patch(row["cuda"]),
                        os=tuple(row["os"]),
                        cudnn_os=tuple(row.get("cudnn_os", ())),
                        cudnn_tag=row.get("cudnn_tag"),
                        cudnn=row.get("cudnn"),
                        nccl=row.get("nccl"),
                        eol=row.get("eol"),
                        deleted=row.get("deleted"),
                        platforms=tuple(row.get("platforms", ())),
                        prov=_prov(rel, f"[[image]] {row['cuda']}", row),
                    )
                )
            policy = data.get("image_policy")
            if policy:
                image_policy = ImagePolicy(
                    repository=policy["repository"],
                    delete_after_months=policy["delete_after_months"],
                    prov=_prov(rel, "[image_policy]", policy),
                )
        elif kind == "gpus":
            gpu_keys = entry.get("keys")
            for row in data["gpu"]:
                cc = parse_minor(row["compute_capability"])
                gpus.append(
                    Gpu(
                        name=row["name"],
                        aliases=tuple(row.get("aliases", ())),
                        cc=cc,
                        architecture=row["architecture"],
                        first_cuda=parse_minor(row["first_cuda"]),
                        data_center=row.get("data_center", False),
                        max_driver_branch=row.get("max_driver_branch"),
                        host_platforms=tuple(row.get("host_platforms", ())),
                        integrated=row.get("integrated", False),
                        integrated_stack=row.get("integrated_stack"),
                        segment=row.get("segment"),
                        min_driver_branch=row.get("min_driver_branch"),
                        bf16=row.get("bf16", has_bf16(cc)),
                        fp16=row.get("fp16", has_fp16(cc)),
                        memory_gb=tuple(row.get("memory_gb", ())),
                        prov=_prov(rel, f"[[gpu]] {row['name']}", row),
                    )
                )
        elif kind == "os":
            for row in data["os"]:
                oses[row["name"]] = OperatingSystem(
                    name=row["name"],
                    image=row["image"],
                    family=row["family"],
                    python=parse_minor(row["python"]),
                    glibc=parse_minor(row["glibc"]),
                    prov=_prov(rel, f"[[os]] {row['name']}", row),
                )
        elif kind == "requirements":
            requirement_rows = build_requirements(rel, data)
        else:
            frameworks.append(_build_framework(rel, data))
    order = {name: i for i, name in enumerate(FRAMEWORK_ORDER)}
    frameworks.sort(key=lambda fw: (order.get(fw.name, len(order)), fw.name))
    cuda.sort(key=lambda c: c.version)
    ga_floor = {c.version[:2]: c for c in cuda if c.ga}
    gpu_rows = tuple(gpus)
    _remember_gpu_keys(gpu_rows, gpu_keys)
    return Matrix(
        root=root,
        digest=digest,
        cuda=tuple(cuda),
        ga_floor=ga_floor,
        minor_compat=minor_compat,
        branches=branches,
        gpus=gpu_rows,
        frameworks=tuple(frameworks),
        images=tuple(images),
        cudnn=tuple(cudnn),
        oses=oses,
        image_policy=image_policy,
        requirement_rows=requirement_rows,
    )


def _platforms_source(*levels: dict[str, Any]) -> str | None:
    """The source of the level whose `platforms` the variant takes (variant, release, framework)."""
    for level in levels:
        if level.get("platforms"):
            return level.get("platforms_source")
    return None


def _arch_by_platform(variant: dict[str, Any]) -> tuple[PlatformArch, ...]:
    """The variant's per-platform lists, in platform order (the schema checked each has a source)."""
    lists = variant.get("arch_by_platform") or {}
    sources = variant.get("arch_by_platform_source") or {}
    return tuple(
        PlatformArch(platform=platform, arch=parse_arch_list(text), source=sources[platform])
        for platform, text in sorted(lists.items())
    )


def _build_framework(rel: str, data: dict[str, Any]) -> Framework:
    head = data["framework"]
    releases: list[Release] = []
    for row in data["release"]:
        first = row["versions"][0]
        variants = tuple(
            Variant(
                name=v["name"],
                cuda=parse_minor(v["cuda"]) if "cuda" in v else None,
                cuda_min=parse_minor(v["cuda_min"]) if "cuda_min" in v else None,
                cudnn=v.get("cudnn"),
                nccl=v.get("nccl"),
                index_url=v["index_url"],
                extra=v.get("extra"),
                cuda_from=v["cuda_from"],
                arch=parse_arch_list(v["arch"]),
                arch_source=v.get("arch_source"),
                arch_by_platform=_arch_by_platform(v),
                # the nearest level that says: variant, release, framework; none at all is what
                # `matrix check` reports (an empty tuple here, never a guessed platform)
                platforms=tuple(v.get("platforms") or row.get("platforms") or head.get("platforms") or ()),
                platforms_source=_platforms_source(v, row, head),
                prov=_prov(rel, f"[[release]] {first} variant {v['name']}", v),
            )
            for v in row["variant"]
        )
        python = tuple(sorted(parse_minor(p) for p in row["python"]))
        for version in row["versions"]:
            releases.append(
                Release(
                    version=version,
                    key=release_key(version),
                    python=python,
                    pypi_variant=row.get("pypi_variant"),
                    variants=variants,
                    # named for this release, not the row's first version: a caveat on a 2.7.1 stack
                    # must say 2.7.1 (the variants stay shared; the solver names them per release)
                    prov=_prov(rel, f"[[release]] {version}", row),
                )
            )
    releases.sort(key=lambda r: r.key, reverse=True)
    return Framework(
        name=head["name"],
        display_name=head["display_name"],
        package=head["package"],
        aliases=tuple(a.lower() for a in head.get("aliases", ())),
        conda_packages=tuple(head.get("conda_packages", ())) or (head["package"],),
        releases=tuple(releases),
        prov=_prov(rel, "[framework]", head),
    )
