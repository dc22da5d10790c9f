"""CUDA libraries an image holds more than once: each copy's path, version and bytes, which copy the
framework loads, and the bytes the other copies waste.

Two copies of the CUDA runtime in one image are a known cost (vllm-project/vllm#14433, open): an
`nvidia/cuda` cuDNN base image carries cuBLAS, cuDNN, NCCL... in /usr/local/cuda and
/usr/lib/<arch>-linux-gnu, and torch's `nvidia-*` wheels bring the same libraries again, gigabytes of
them, of which the framework loads one (audit.loading says which, with its source). Packages bring
copies of their own too: triton 3.2.0 ships CUPTI in triton/backends/nvidia/lib/cupti beside
`nvidia-cuda-cupti-cu12`'s.

Found from what the audit already has: the path of every ELF shared object and the bytes it adds
(audit.kernels.Kernels.size, from the walk's stat). Nothing is read again. A warning, never a failure:
a duplicate costs bytes, not correctness, as long as the loaded copy is the right one.

A library is known by its file name's stem (`libcudart` of `libcudart.so.12` and of
`libcudart.so.12.4.127`), so copies of different patch releases, and of different sonames (cuDNN 8
next to 9), are found alike. A copy's version comes from its file name (`libcudart.so.12.4.127`:
12.4.127; a wheel's `libcudart.so.12` gives only the soname, 12); a build knows its lock and passes
the wheels' versions (`with_wheel_versions`).
"""

from __future__ import annotations

import posixpath
import re

from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit.loading import WHEEL_LOADERS

if TYPE_CHECKING:
    from collections.abc import Mapping

# file name stem -> (the component, the nvidia-* wheel that ships it). The libraries of NVIDIA's CUDA
# redistributables, cuDNN and NCCL, as the wheels and nvidia/cuda's apt packages name their files.
LIBRARIES = {
    "libcudart": ("CUDA runtime", "nvidia-cuda-runtime"),
    "libcublas": ("cuBLAS", "nvidia-cublas"),
    "libcublasLt": ("cuBLAS", "nvidia-cublas"),
    "libnvblas": ("cuBLAS", "nvidia-cublas"),
    "libcudnn": ("cuDNN", "nvidia-cudnn"),
    "libnccl": ("NCCL", "nvidia-nccl"),
    "libcufft": ("cuFFT", "nvidia-cufft"),
    "libcufftw": ("cuFFT", "nvidia-cufft"),
    "libcusparse": ("cuSPARSE", "nvidia-cusparse"),
    "libcusparseLt": ("cuSPARSELt", "nvidia-cusparselt"),
    "libcusolver": ("cuSOLVER", "nvidia-cusolver"),
    "libcusolverMg": ("cuSOLVER", "nvidia-cusolver"),
    "libcurand": ("cuRAND", "nvidia-curand"),
    "libnvJitLink": ("nvJitLink", "nvidia-nvjitlink"),
    "libnvrtc": ("NVRTC", "nvidia-cuda-nvrtc"),
    "libnvrtc-builtins": ("NVRTC", "nvidia-cuda-nvrtc"),
    "libcupti": ("CUPTI", "nvidia-cuda-cupti"),
    "libnvperf_host": ("CUPTI", "nvidia-cuda-cupti"),
    "libnvperf_target": ("CUPTI", "nvidia-cuda-cupti"),
    "libpcsamplingutil": ("CUPTI", "nvidia-cuda-cupti"),
    "libnvToolsExt": ("NVTX", "nvidia-nvtx"),
    "libcufile": ("cuFile", "nvidia-cufile"),
    "libcufile_rdma": ("cuFile", "nvidia-cufile"),
    "libnvjpeg": ("nvJPEG", "nvidia-nvjpeg"),
    "libnvshmem_host": ("NVSHMEM", "nvidia-nvshmem"),
}
# CUPTI's libcheckpoint.so is left out: too generic a name to call a CUDA library by it alone.
# stems that name a family: cuDNN 9's libcudnn_ops, libcudnn_adv...; NPP's libnppc, libnppial...
PREFIXES = (("libcudnn_", "cuDNN", "nvidia-cudnn"), ("libnpp", "NPP", "nvidia-npp"))

SHOWN = 6  # libraries the one-line warning names, the most bytes first
_NAME = re.compile(r"^(?P<stem>[^/]+?)\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$")
# a Python environment's package directory: an nvidia-* wheel's files lie under nvidia/ (or, for
# nvidia-cusparselt-cu12 0.6, cusparselt/) in it
_SITE = re.compile(r"^(?P<site>(?:.*/)?(?:site|dist)-packages)/(?P<rest>.*)$")
_WHEEL_TOP = ("nvidia/", "cusparselt/")
# where the dynamic loader finds a library without an RPATH: the ld.so cache's directories
_SYSTEM = ("usr/local/cuda", "usr/lib/", "usr/lib64/", "lib/", "lib64/")


class Copy(Record):
    """One copy of a library. version: from its file name, or its wheel's (None: neither says);
    loaded: the copy the framework loads (None when that is not known: no framework)."""

    __slots__ = ("path", "size", "version", "version_from", "loaded")
    path: str
    size: int | None
    version: str | None
    version_from: str | None  # "file name", or the wheel's name ("nvidia-cuda-runtime-cu12")
    loaded: bool | None


class Duplicate(Record):
    """A library present more than once: its file name stem, its component, and every copy."""

    __slots__ = ("library", "component", "wheel", "copies")
    library: str
    component: str
    wheel: str  # the nvidia-* wheel that ships it, without the -cuNN suffix
    copies: tuple[Copy, ...]

    @property
    def wasted(self) -> int:
        """The bytes of every copy but the loaded one; when none is known to be loaded, of every copy
        but the largest (the least the duplicates cost)."""
        sizes = [copy.size or 0 for copy in self.copies]
        if any(copy.loaded for copy in self.copies):
            return sum(copy.size or 0 for copy in self.copies if not copy.loaded)
        return sum(sizes) - max(sizes)


def library_of(name: str) -> tuple[str, str, str] | None:
    """(stem, component, wheel) for a CUDA library's file name; None for any other file."""
    match = _NAME.match(name)
    if match is None:
        return None
    stem = match.group("stem")
    if stem in LIBRARIES:
        return (stem, *LIBRARIES[stem])
    for prefix, component, wheel in PREFIXES:
        if stem.startswith(prefix):
            return stem, component, wheel
    return None


def name_version(name: str) -> str | None:
    """ "12.4.127" of libcudart.so.12.4.127, "12" of libcudart.so.12, None of libcupti.so."""
    match = _NAME.match(name)
    return match.group("version") if match else None


def _site(path: str) -> tuple[str, str] | None:
    """(the site-packages directory, the path inside it), or None outside one."""
    match = _SITE.match(path)
    return (match.group("site"), match.group("rest")) if match else None


def is_wheel_copy(path: str) -> bool:
    """A file an nvidia-* wheel installed: under site-packages/nvidia/ (or cusparselt/)."""
    inside = _site(path)
    return inside is not None and inside[1].startswith(_WHEEL_TOP)


def _loaded(paths: list[str], framework: str | None, framework_paths: list[str]) -> str | None:
    """Which of `paths` (copies of one library) the framework loads, or None when that is unknown.

    The framework's own site-packages first: every framework here prefers its nvidia-* wheels' copy
    (audit.loading.WHEEL_LOADERS, with the sources). Without one there, the environment's lib/ (a conda
    env: the framework's RPATH), then the one copy in a directory of the ld.so cache (an nvidia/cuda
    image's /usr/local/cuda, /usr/lib/<arch>-linux-gnu)."""
    if framework not in WHEEL_LOADERS:
        return None
    sites = {inside[0] for inside in map(_site, framework_paths) if inside is not None}
    wheel = [p for p in paths if is_wheel_copy(p) and _site(p)[0] in sites]  # type: ignore[index]
    if wheel:
        return wheel[0]
    environments = {site.rsplit("/lib/python", 1)[0] + "/lib" for site in sites if "/lib/python" in site}
    conda = [p for p in paths if posixpath.dirname(p) in environments]
    if len(conda) == 1:
        return conda[0]
    system = [p for p in paths if p.startswith(_SYSTEM) and _site(p) is None]
    return system[0] if len(system) == 1 else None


def find_duplicates(
    sizes: Mapping[str, int | None], framework: str | None = None, framework_paths: tuple[str, ...] = ()
) -> tuple[Duplicate, ...]:
    """Every CUDA library among `sizes` ({path: bytes it adds}) present more than once, sorted by the
    bytes wasted (most first). framework_paths: the framework's own libraries (audit.libraries), whose
    site-packages says which wheels are its own. A further name of a hard-linked file (0 bytes) is the
    same copy, not another."""
    groups: dict[str, list[str]] = {}
    known: dict[str, tuple[str, str]] = {}
    for path, size in sizes.items():
        found = library_of(posixpath.basename(path))
        if found is None or size == 0:
            continue
        stem, component, wheel = found
        groups.setdefault(stem, []).append(path)
        known[stem] = (component, wheel)
    duplicates = []
    for stem, paths in groups.items():
        if len(paths) < 2:
            continue
        paths = sorted(paths)
        loaded = _loaded(paths, framework, list(framework_paths))
        copies = tuple(
            Copy(
                path=path,
                size=sizes[path],
                version=name_version(posixpath.basename(path)),
                version_from="file name" if name_version(posixpath.basename(path)) else None,
                loaded=None if loaded is None else path == loaded,
            )
            for path in paths
        )
        component, wheel = known[stem]
        duplicates.append(Duplicate(library=stem, component=component, wheel=wheel, copies=copies))
    return tuple(sorted(duplicates, key=lambda d: (-d.wasted, d.library)))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def with_wheel_versions(
    duplicates: tuple[Duplicate, ...], wheels: Mapping[str, str]
) -> tuple[Duplicate, ...]:
    """The duplicates with each wheel copy's version taken from `wheels` ({distribution: version}: the
    build's lock): `libcudart.so.12` says only its soname, nvidia-cuda-runtime-cu12 says 12.4.127. A
    wheel the mapping names once per family (with or without its -cuNN suffix) is the one installed."""
    versions = {_canonical(name): (name, version) for name, version in wheels.items()}
    result = []
    for duplicate in duplicates:
        family = re.compile(rf"^{re.escape(duplicate.wheel)}(-cu\d+)?$")
        matches = [entry for key, entry in sorted(versions.items()) if family.match(key)]
        if len(matches) != 1:
            result.append(duplicate)
            continue
        name, version = matches[0]
        copies = tuple(
            copy.replace(version=version, version_from=name) if is_wheel_copy(copy.path) else copy
            for copy in duplicate.copies
        )
        result.append(duplicate.replace(copies=copies))
    return tuple(result)


def total_wasted(duplicates: tuple[Duplicate, ...]) -> int:
    return sum(duplicate.wasted for duplicate in duplicates)


def megabytes(size: int | None) -> str:
    """ "707.9 kB", "441.9 MB", "2.82 GB": decimal units, as registries and `docker images` show sizes."""
    if size is None:
        return "size unknown"
    if size >= 1_000_000_000:
        return f"{size / 1e9:.2f} GB"
    if size >= 1_000_000:
        return f"{size / 1e6:.1f} MB"
    return f"{size / 1e3:.1f} kB"


def document(duplicates: tuple[Duplicate, ...]) -> list[dict]:
    """The duplicates as JSON (`envbuild audit --json` and record.json's audit)."""
    return [
        {
            "library": duplicate.library,
            "component": duplicate.component,
            "copies": [
                {
                    "path": copy.path,
                    "bytes": copy.size,
                    "version": copy.version,
                    "version_from": copy.version_from,
                    "loaded": copy.loaded,
                }
                for copy in duplicate.copies
            ],
            "wasted_bytes": duplicate.wasted,
        }
        for duplicate in duplicates
    ]


def warning(duplicates: tuple[Duplicate, ...], framework: str | None) -> str | None:
    """One line for the build's warnings: how many libraries, which, and the bytes."""
    if not duplicates:
        return None
    names = ", ".join(f"{d.library} x{len(d.copies)}" for d in duplicates[:SHOWN])
    names += f" and {len(duplicates) - SHOWN} more" if len(duplicates) > SHOWN else ""
    loaded = any(copy.loaded for d in duplicates for copy in d.copies)
    whose = f"copies {framework} does not load" if loaded and framework else "copies beyond one each"
    return (
        f"{len(duplicates)} CUDA librar{'y is' if len(duplicates) == 1 else 'ies are'} present more than "
        f"once ({names}): {megabytes(total_wasted(duplicates))} in {whose} (`envbuild audit IMAGE` lists "
        "each copy)"
    )
