"""The compatibility matrix as the resolver reads it: one immutable record type per kind of row.

Every row keeps its Provenance (file, row, source URL, confidence), so any stack can say which facts
it rests on. Loading the files is envbuild.matrix.load.
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.arch import ArchList
from envbuild.matrix.gpunames import loose_key, name_key, name_tokens
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.requirements import Requirements

FRAMEWORK_ORDER = ("torch", "tensorflow", "jax")
# How a stack's CUDA runtime reaches the image: the framework's own wheels, an nvidia/cuda base image,
# or conda-forge packages. A variant's `cuda_from` says which it supports.
STRATEGIES = ("wheels", "base-image", "conda")
# How a driver runs a CUDA release: natively, or (opt-in) through minor-version compatibility.
COMPAT_MODES = ("native", "minor")


class Provenance(Record):
    __slots__ = ("where", "source", "confidence", "note")
    where: str  # "drivers.toml [[cuda]] 12.4.0": what a caveat points a reader at
    source: str
    confidence: str | None
    note: str | None


class CudaRelease(Record):
    __slots__ = ("version", "label", "ga", "min_driver", "prov")
    version: tuple[int, int, int]
    label: str
    ga: bool
    min_driver: tuple[int, ...] | None
    prov: Provenance


class MinorCompat(Record):
    __slots__ = ("cuda_major", "min_driver", "prov")
    cuda_major: int
    min_driver: tuple[int, ...]
    prov: Provenance


class Branch(Record):
    __slots__ = ("branch", "native_cuda", "type", "eol", "prov")
    branch: int
    native_cuda: tuple[int, int]
    type: str
    eol: str | None
    prov: Provenance


class Gpu(Record):
    __slots__ = (
        "name",
        "aliases",
        "cc",
        "architecture",
        "first_cuda",
        "data_center",
        "max_driver_branch",
        "host_platforms",
        "integrated",
        "integrated_stack",
        "segment",
        "min_driver_branch",
        "bf16",
        "fp16",
        "memory_gb",
        "prov",
    )
    name: str
    aliases: tuple[str, ...]
    cc: tuple[int, int]
    architecture: str
    first_cuda: tuple[int, int]  # first CUDA X.Y for this capability; the first driver branch follows
    data_center: bool
    max_driver_branch: int | None
    # the platforms of the hosts it comes in (GH200/GB200: linux/arm64 only); empty: any host
    host_platforms: tuple[str, ...]
    integrated: bool  # Jetson/Tegra: JetPack/L4T, not the data-center CUDA stack envbuild builds
    integrated_stack: str | None  # what such a GPU uses instead (named when it is refused)
    segment: str | None  # "data-center", "workstation", "geforce" or "jetson" (NVIDIA's lists)
    min_driver_branch: int | None  # a later floor than first_cuda's branch, for a late SKU
    bf16: bool  # bfloat16 arithmetic (compute capability 8.0 and up); absent in the row: derived
    fp16: bool  # float16 arithmetic (5.3, 6.x and 7.0 up); absent in the row: derived
    memory_gb: tuple[int, ...]  # the memory sizes sold, in GB; empty: not recorded
    prov: Provenance


class PlatformArch(Record):
    """A build's arch list on one platform where it differs from the variant's `arch`: PyTorch's
    aarch64 wheels are compiled for fewer GPUs (8.0 and up) than its x86_64 wheels of the same tag."""

    __slots__ = ("platform", "arch", "source")
    platform: str  # canonical: linux/arm64
    arch: ArchList
    source: str  # where that list was read: a build script, RELEASE.md, or the audited wheel (#sha256=)

    @property
    def measured(self) -> bool:
        """Whether `source` is a wheel this list was measured from (`matrix refresh --audit`)."""
        return ".whl#sha256=" in self.source


class Variant(Record):
    __slots__ = (
        "name",
        "cuda",
        "cuda_min",
        "cudnn",
        "nccl",
        "index_url",
        "extra",
        "cuda_from",
        "arch",
        "arch_source",
        "arch_by_platform",
        "platforms",
        "platforms_source",
        "prov",
    )
    name: str
    cuda: tuple[int, int] | None  # fixed runtime
    cuda_min: tuple[int, int] | None  # open range within cuda_min's major
    cudnn: str | None
    nccl: str | None
    index_url: str
    extra: str | None
    cuda_from: str
    arch: ArchList
    arch_source: str | None  # "<wheel URL>#sha256=<hex>": the arch list was read from that artifact
    # per-platform lists that differ from `arch` (which is every other platform's: the x86_64 wheel's)
    arch_by_platform: tuple[PlatformArch, ...]
    # canonical platforms the build is published for (variant, else release, else framework default)
    platforms: tuple[str, ...]
    platforms_source: str | None  # where the arm64 (or any non-default) claim was read
    prov: Provenance

    def platform_arch(self, platform: str) -> PlatformArch | None:
        """The platform's own list when the row gives one, else None (the platform uses `arch`)."""
        for entry in self.arch_by_platform:
            if entry.platform == platform:
                return entry
        return None

    def arch_for(self, platform: str) -> ArchList:
        """The kernels the build carries on `platform`: what resolve, render's labels, the lock and the
        SBOM must all read, so an arm64 image never claims the x86_64 wheel's GPUs."""
        entry = self.platform_arch(platform)
        return entry.arch if entry is not None else self.arch

    def arch_source_for(self, platform: str) -> str | None:
        """The wheel the platform's list was measured from, or None (read from a document, not a wheel)."""
        entry = self.platform_arch(platform)
        if entry is None:
            return self.arch_source
        return entry.source if entry.measured else None


class Release(Record):
    __slots__ = ("version", "key", "python", "pypi_variant", "variants", "prov")
    version: str
    key: tuple[int, ...]  # sortable release number (the matrix holds final releases only)
    python: tuple[tuple[int, int], ...]  # ascending
    pypi_variant: str | None
    variants: tuple[Variant, ...]
    prov: Provenance


class Framework(Record):
    __slots__ = ("name", "display_name", "package", "aliases", "conda_packages", "releases", "prov")
    name: str
    display_name: str
    package: str
    aliases: tuple[str, ...]
    conda_packages: tuple[str, ...]  # conda-forge names; the last carries the CUDA build string
    releases: tuple[Release, ...]  # newest first
    prov: Provenance


class OperatingSystem(Record):
    __slots__ = ("name", "image", "family", "python", "glibc", "prov")
    name: str  # as nvidia/cuda tags spell it: ubuntu22.04
    image: str  # the plain base image
    family: str  # ubuntu | debian
    python: tuple[int, int]  # the system python3
    glibc: tuple[int, int]
    prov: Provenance


class Image(Record):
    __slots__ = (
        "cuda",
        "os",
        "cudnn_os",
        "cudnn_tag",
        "cudnn",
        "nccl",
        "eol",
        "deleted",
        "platforms",
        "prov",
    )
    cuda: tuple[int, int, int]
    os: tuple[str, ...]
    cudnn_os: tuple[str, ...]
    cudnn_tag: str | None
    cudnn: str | None
    nccl: str | None
    eol: str | None  # "YYYY-MM" when a source states it; else it follows the driver branch
    deleted: str | None  # "YYYY-MM-DD": the day a refresh found every tag of the row gone
    platforms: tuple[str, ...]  # platforms of the row's Ubuntu tags; empty: not recorded (amd64 only)
    prov: Provenance


class ImagePolicy(Record):
    """NVIDIA's lifecycle rule for nvidia/cuda tags (cuda.toml [image_policy])."""

    __slots__ = ("repository", "delete_after_months", "prov")
    repository: str
    delete_after_months: int
    prov: Provenance


class CudnnRelease(Record):
    __slots__ = ("version", "cuda", "min_cc", "prov")
    version: tuple[int, int]
    cuda: tuple[tuple[tuple[int, int], tuple[int, int]], ...]
    min_cc: tuple[int, int] | None
    prov: Provenance


class Matrix(Record):
    __slots__ = (
        "root",
        "digest",
        "cuda",
        "ga_floor",
        "minor_compat",
        "branches",
        "gpus",
        "frameworks",
        "images",
        "cudnn",
        "oses",
        "image_policy",
        "requirement_rows",
    )
    root: str
    digest: str
    cuda: tuple[CudaRelease, ...]
    ga_floor: dict[tuple[int, int], CudaRelease]  # X.Y -> its GA release row
    minor_compat: dict[int, MinorCompat]
    branches: dict[int, Branch]
    gpus: tuple[Gpu, ...]
    frameworks: tuple[Framework, ...]  # torch, tensorflow, jax, then any others by name
    images: tuple[Image, ...]
    cudnn: tuple[CudnnRelease, ...]
    oses: dict[str, OperatingSystem]
    image_policy: ImagePolicy | None
    # (framework, version, variant) -> requirements.toml's row; empty for a matrix without the file
    requirement_rows: dict[tuple[str, str, str], Requirements]

    def requirements(self, framework: str, version: str, variant: str) -> Requirements | None:
        """What the build's wheel METADATA requires of the CUDA family, or None: not measured."""
        return self.requirement_rows.get((framework, version, variant))

    def framework(self, name: str) -> Framework | None:
        wanted = name.lower()
        for fw in self.frameworks:
            if fw.name == wanted or wanted in fw.aliases:
                return fw
        return None

    def image_for(self, cuda: tuple[int, int], os_name: str, platform: str | None = None) -> Image | None:
        """The nvidia/cuda release of that X.Y with cuDNN flavors on that OS (newest patch), published
        for `platform` when one is given.

        Rows whose tags a refresh found gone are never offered: a build from them cannot pull."""
        found = [
            i
            for i in self.images
            if i.cuda[:2] == cuda
            and os_name in i.cudnn_os
            and not i.deleted
            and (platform is None or platform in image_platforms(i))
        ]
        return max(found, key=lambda i: i.cuda) if found else None

    def minors_of_major(self, major: int) -> list[tuple[int, int]]:
        """CUDA X.Y minors of a major that have a known GA minimum driver, oldest first."""
        return sorted(m for m, row in self.ga_floor.items() if m[0] == major and row.min_driver)


def image_platforms(image: Image) -> tuple[str, ...]:
    """The platforms an image row is published for; a row that records none is taken as amd64 only
    (the one platform every nvidia/cuda Ubuntu tag has), never as "any"."""
    return image.platforms or (DEFAULT_PLATFORM,)


# ---------------------------------------------------------------------------------------------
# GPU names: one key per spelling (envbuild.matrix.gpunames), so "H100", "h100 sxm" and nvidia-smi's
# "NVIDIA H100 80GB HBM3" find the same row (and `matrix check` can refuse two rows claiming one key)


def gpu_tokens(text: str) -> tuple[str, ...]:
    """The telling words of a GPU name: "NVIDIA GeForce RTX 4090" -> ("rtx", "4090"),
    "NVIDIA A100-SXM4-80GB" -> ("a100",) (gpunames.name_tokens)."""
    return name_tokens(text)


def gpu_keys(gpu: Gpu) -> set[str]:
    """Every key the row answers to: its name's and each alias's."""
    return {name_key(label) for label in (gpu.name, *gpu.aliases)} - {""}


# the index of the last few GPU tuples keyed: resolve, doctor and the platform choice each look names
# up, and keying a catalogue of hundreds of rows costs milliseconds (issue 34 item 9). Keyed by the
# tuple's identity, holding the tuple, so an id is never reused while its entry lives. An entry is an
# index, or the matrix cache's keys it is built from on first use (one line of keys per row: load.py).
_INDEXES: dict[int, tuple[tuple[Gpu, ...], dict[str, Gpu] | str]] = {}
_INDEXES_KEPT = 4


def gpu_index(matrix: Matrix) -> dict[str, Gpu]:
    """key -> row, the first row for a key (`matrix check` refuses a key two rows share); built once
    per matrix a process holds, from the matrix cache's keys when it has them. Callers must not
    change it."""
    gpus = matrix.gpus
    entry = _INDEXES.get(id(gpus))
    if entry is not None and entry[0] is gpus:
        index = entry[1] if isinstance(entry[1], dict) else _from_cached_keys(gpus, entry[1])
        if index is not None:
            return index
    index = {}
    for gpu in gpus:
        for key in gpu_keys(gpu):
            index.setdefault(key, gpu)
    _remember(gpus, index)
    return index


def _from_cached_keys(gpus: tuple[Gpu, ...], keys: str) -> dict[str, Gpu] | None:
    """The index from the cache's keys, or None when they do not fit these rows (a damaged entry
    costs the keying, never a wrong row)."""
    lines = keys.split("\n")
    if len(lines) != len(gpus):
        return None
    index: dict[str, Gpu] = {}
    for gpu, line in zip(gpus, lines, strict=True):
        for key in line.split():
            index.setdefault(key, gpu)
    _remember(gpus, index)
    return index


def remember_gpu_keys(gpus: tuple[Gpu, ...], keys: str) -> None:
    """Take the matrix cache's keys for exactly this tuple of rows (load.py), so a process that loads
    a cached matrix keys no row's name at all; turned into the index on first use."""
    _remember(gpus, keys)


def _remember(gpus: tuple[Gpu, ...], known: dict[str, Gpu] | str) -> None:
    if id(gpus) not in _INDEXES and len(_INDEXES) >= _INDEXES_KEPT:
        _INDEXES.pop(next(iter(_INDEXES)))
    _INDEXES[id(gpus)] = (gpus, known)


def find_gpu(matrix: Matrix, text: str, index: dict[str, Gpu] | None = None) -> Gpu | None:
    """The row a GPU name or alias names, however it is spelled or nvidia-smi prints it, or None.

    The name's key must be a row's key exactly ("H1000" is not "H100", "A10G" not "A10"): a prefix
    match would give "RTX 3080 Ti" the RTX 3080 row and "RTX 6000 Ada Generation" the Turing RTX 6000
    whenever the catalogue lacked the longer name. Soft words ("Laptop GPU", "Server Edition") are
    dropped only when no row keeps them (gpunames.loose_key)."""
    index = index if index is not None else gpu_index(matrix)
    found = index.get(name_key(text))
    if found is None:
        loose = loose_key(text)
        found = index.get(loose) if loose else None
    return found
