"""Audit a directory tree (an unpacked wheel, an image's filesystem): every shared object's kernels,
and a verdict per GPU for the libraries that count."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

from envbuild._util import limits
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.audit.duplicates import Duplicate, find_duplicates
from envbuild.audit.kernels import Kernels, cuobjdump_binary, read_kernels
from envbuild.audit.libraries import FRAMEWORK_LIBRARIES, check_framework, counts_for, framework_of
from envbuild.audit.skip import EXAMPLE, AuditSkip
from envbuild.audit.verdict import RUNS, judge
from envbuild.errors import UsageError
from envbuild.matrix.model import Gpu

if TYPE_CHECKING:
    from collections.abc import Callable


class LibraryAudit(Record):
    """One library with device code, or one cuobjdump could not read to the end (kernels.unread): a
    partly read one is judged by the entries it listed; a library not read at all has no verdict
    that means anything, so it is never among `failures`: `unreadable` says it instead.

    skipped: None, or the skip (--skip-audit, [audit] skip) that says why it is not judged: it keeps
    its listing, has no verdicts and is never among `failures` or `unreadable`."""

    __slots__ = ("path", "kernels", "counts", "verdicts", "skipped")
    path: str  # inside the artifact, "/"-separated
    kernels: Kernels
    counts: bool  # a library the framework loads its kernels from
    verdicts: tuple[tuple[str, str], ...]  # (GPU name, verdict), in the order the GPUs were given
    skipped: AuditSkip | None

    def __init__(
        self,
        *,
        path: str,
        kernels: Kernels,
        counts: bool,
        verdicts: tuple[tuple[str, str], ...],
        skipped: AuditSkip | None = None,
    ) -> None:
        super().__init__(path=path, kernels=kernels, counts=counts, verdicts=verdicts, skipped=skipped)

    @property
    def judged(self) -> bool:
        """Whether a verdict of it means anything: listed (if only in part), and not skipped."""
        return self.skipped is None and not self.kernels.not_read


class Audit(Record):
    """duplicates: the CUDA libraries present more than once (audit.duplicates), a warning only."""

    __slots__ = ("target", "framework", "gpus", "libraries", "without_device_code", "duplicates", "skips")
    target: str
    framework: str | None
    gpus: tuple[Gpu, ...]
    libraries: tuple[LibraryAudit, ...]  # those with device code
    without_device_code: tuple[str, ...]
    duplicates: tuple[Duplicate, ...]
    skips: tuple[AuditSkip, ...]  # every skip asked for, whether the artifact has its library or not

    def __init__(
        self,
        *,
        target: str,
        framework: str | None,
        gpus: tuple[Gpu, ...],
        libraries: tuple[LibraryAudit, ...],
        without_device_code: tuple[str, ...],
        duplicates: tuple[Duplicate, ...] = (),
        skips: tuple[AuditSkip, ...] = (),
    ) -> None:
        super().__init__(
            target=target,
            framework=framework,
            gpus=gpus,
            libraries=libraries,
            without_device_code=without_device_code,
            duplicates=duplicates,
            skips=skips,
        )

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(GPU name, library) for every counted library that has no kernel image for a GPU (in what
        cuobjdump could list of it)."""
        return [
            (gpu, library.path)
            for library in self.libraries
            if library.counts and library.judged
            for gpu, verdict in library.verdicts
            if verdict not in RUNS
        ]

    @property
    def unreadable(self) -> list[LibraryAudit]:
        """Counted libraries cuobjdump could read nothing of: the audit cannot decide them, so it fails
        on them rather than pass what it never saw. An uncounted one is only reported, and a skipped
        one is the team's recorded decision."""
        return [
            library
            for library in self.libraries
            if library.counts and library.kernels.not_read and library.skipped is None
        ]

    @property
    def skipped(self) -> list[LibraryAudit]:
        """Libraries a skip kept from being judged."""
        return [library for library in self.libraries if library.skipped is not None]

    def skip_paths(self, skip: AuditSkip) -> tuple[str, ...]:
        """Every shared object of the artifact `skip` names, with device code or without."""
        paths = [library.path for library in self.libraries] + list(self.without_device_code)
        return tuple(sorted(path for path in paths if skip.matches(path)))

    @property
    def skips_unmatched(self) -> list[AuditSkip]:
        """Skips naming a library the artifact does not have: a warning (a typo, or a stale skip)."""
        return [skip for skip in self.skips if not self.skip_paths(skip)]

    @property
    def partly_read(self) -> list[LibraryAudit]:
        """Libraries judged by the entries cuobjdump listed before it stopped (reported, with why)."""
        return [library for library in self.libraries if library.kernels.partly_read]

    @property
    def framework_missing(self) -> bool:
        """A framework was named (--framework, or the spec's) but none of its libraries has device
        code: a CPU build, or the wrong artifact. Its ops would reach no GPU at all, so when GPUs were
        asked for this fails too, rather than pass because nothing was judged."""
        return bool(self.framework and self.gpus and not any(lib.counts for lib in self.libraries))

    @property
    def ok(self) -> bool:
        return not self.failures and not self.unreadable and not self.framework_missing


# what to do about a deciding library cuobjdump could not list (audit.report and the build's gate)
UNREADABLE_FIX = (
    "cuobjdump could not list the kernels of a library that decides the audit, so no GPU can be "
    "judged by it: try the newest cuobjdump (pip install -U nvidia-cuda-cuobjdump), and if it still "
    "stops, report it to envbuild with the cuobjdump version and the library's wheel"
)


def unreadable_fix(libraries: list[LibraryAudit]) -> str:
    """UNREADABLE_FIX, and how to build anyway: the exact --skip-audit for these libraries."""
    names = list(dict.fromkeys(os.path.basename(library.path) for library in libraries))
    flags = " ".join(f'--skip-audit {name}="REASON"' for name in names) or EXAMPLE
    return (
        f"{UNREADABLE_FIX}; to build without judging it, record that decision: {flags} (or "
        f'[audit] skip = [{{library = "{names[0] if names else "LIBRARY"}", reason = "..."}}] in '
        "envbuild.toml), which the audit report, record.json and the SBOM keep"
    )


_SHARED_OBJECT_NAME = re.compile(r"\.so(\.\d+)*$")  # libfoo.so, libcudart.so.12, libcublasLt.so.12.4.5.8
WORKERS = 4  # cuobjdump runs at once: a directory of many small objects is bound by process starts


def is_shared_object_name(name: str) -> bool:
    """A shared object's file name: `.so`, optionally followed by numeric versions. Not `foo.so.py`,
    `x.sources` or `ld.so.conf`, which `".so" in name` would take."""
    return _SHARED_OBJECT_NAME.search(name) is not None


LINK_HOPS = limits.LINK_HOPS.default  # links followed in one path at most, as Linux resolves (ELOOP)


def judged_through(link: str, target: str) -> bool:
    """Whether a symbolic link with a shared object's name at `link` must be judged by the file it
    leads to, `target`: the loader loads the target's bytes under the link's name, and the audit
    judges libraries by their names. So when the target's name is no shared object's name (it would
    not be judged at all), or a framework counts the link's path but not the target's
    (`libtorch_cuda.so` -> `libtorch_cuda.so.2`), the target is judged under the link's path. The
    usual `libfoo.so -> libfoo.so.12` is one library, judged once under its real name."""
    if not is_shared_object_name(os.path.basename(target)):
        return True
    return any(counts_for(link, name) and not counts_for(target, name) for name in FRAMEWORK_LIBRARIES)


def resolve(
    path: str, readlink: Callable[[str], str | None], *, absolute: bool, hops: int = LINK_HOPS
) -> str | None:
    """The path ("/"-separated, from the tree's root) that `path` leads to in a tree whose links
    `readlink` gives (a path -> its target, None for anything else), as the kernel resolves it inside
    a container: `..` stops at the root, so no answer is outside the tree; an absolute target starts
    at the root when `absolute` (an image's filesystem), else leaves the tree (None); None after
    `hops` links (a loop)."""
    queue = path.split("/")
    current: list[str] = []
    while queue:
        part = queue.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if current:
                current.pop()
            continue
        candidate = "/".join([*current, part])
        target = readlink(candidate)
        if target is not None:
            hops -= 1
            if hops < 0 or (target.startswith("/") and not absolute):
                return None
            if target.startswith("/"):
                current = []
            queue = target.split("/") + queue
            continue
        current.append(part)
    return "/".join(current) or None


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError as exc:
        raise UsageError(
            f"audit {path}: cannot read it ({exc.strerror})", fix="check its permissions"
        ) from None


def shared_objects(root: str) -> list[str]:
    """Paths (relative to root, "/"-separated) of the ELF shared objects under root, sorted. A symbolic
    link is judged by its target only when judged_through says so (a name the target lacks), never
    through a target outside root: libfoo.so -> libfoo.so.12 is one library, judged once under its
    real name."""
    return sorted(_shared_objects(root))


def _shared_objects(root: str) -> dict[str, str]:
    """{path relative to root: the file to read for it} (a followed link's target inside root)."""
    found: dict[str, str] = {}
    links: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        for name in [*files, *(d for d in subdirectories if os.path.islink(os.path.join(directory, d)))]:
            if not is_shared_object_name(name):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.islink(path):
                links.append(relative)
                continue
            if os.path.isfile(path) and _is_elf(path):
                found[relative] = path
    for link in links:
        target = resolve(link, lambda p: _readlink(root, p), absolute=False)
        if target is None or not judged_through(link, target):
            continue
        path = os.path.join(root, *target.split("/"))
        if not os.path.islink(path) and os.path.isfile(path) and _is_elf(path):
            found[link] = path
    return found


def _readlink(root: str, path: str) -> str | None:
    try:
        return os.readlink(os.path.join(root, *path.split("/")))
    except OSError:
        return None


def audit_tree(
    root: str,
    gpus: tuple[Gpu, ...],
    *,
    target: str,
    framework: str | None = None,
    only: tuple[str, ...] | None = None,
    skip: tuple[AuditSkip, ...] = (),
) -> Audit:
    """Audit every shared object under `root` (or just the `only` paths, relative to it)."""
    check_framework(framework)
    return judge_tree(read_tree(root, only), gpus, target=target, framework=framework, skip=skip)


def read_tree(root: str, only: tuple[str, ...] | None = None) -> dict[str, Kernels]:
    """{path relative to root: its kernels} for every shared object under `root` (or the `only`
    paths), in sorted order: the facts an audit judges, which depend on the files alone."""
    binary = cuobjdump_binary()
    files = {path: os.path.join(root, path) for path in only} if only is not None else _shared_objects(root)
    paths = sorted(files)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:  # map keeps the sorted order
        listed = list(pool.map(lambda path: read_kernels(files[path], binary), paths))
    sizes = file_sizes([files[path] for path in paths])
    return {path: found.replace(size=size) for path, found, size in zip(paths, listed, sizes, strict=True)}


def file_sizes(files: list[str]) -> list[int]:
    """The bytes each file adds: its size from stat (no read of the file), 0 for a further name of a
    file already counted. An image's hard links stay links here: envbuild.image.layers links every
    name of a hard-linked file to the one copy it kept, and a layer directory's are links already."""
    seen: set[tuple[int, int]] = set()
    sizes = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError as exc:
            raise UsageError(
                f"audit {path}: cannot read it ({exc.strerror})", fix="check its permissions"
            ) from None
        key = (info.st_dev, info.st_ino)
        sizes.append(0 if key in seen else info.st_size)
        seen.add(key)
    return sizes


def judge_tree(
    kernels: dict[str, Kernels],
    gpus: tuple[Gpu, ...],
    *,
    target: str,
    framework: str | None = None,
    skip: tuple[AuditSkip, ...] = (),
) -> Audit:
    """The audit of shared objects whose kernels are known (read_tree's answer, or a cached one): a
    verdict per GPU for each library with device code, and which libraries count for `framework`.
    A library `skip` names is listed without verdicts (audit.skip)."""
    check_framework(framework)
    # found only among the libraries with device code: a framework is known from its kernels
    in_gpu_code = [p for p, k in kernels.items() if k.has_device_code or k.unread]
    framework = framework or framework_of(in_gpu_code)
    libraries, plain = [], []
    for path, listed in kernels.items():
        if not listed.has_device_code and listed.unread is None:
            plain.append(path)
            continue
        skipped = next((one for one in skip if one.matches(path)), None)
        verdicts = (
            () if skipped else tuple((gpu.name, judge(listed.sass, listed.ptx, gpu.cc)) for gpu in gpus)
        )
        libraries.append(
            LibraryAudit(
                path=path,
                kernels=listed,
                counts=counts_for(path, framework),
                verdicts=verdicts,
                skipped=skipped,
            )
        )
    # the framework's own libraries, with device code or not: their site-packages holds its wheels
    own = tuple(path for path in kernels if framework is not None and counts_for(path, framework))
    return Audit(
        target=target,
        framework=framework,
        gpus=gpus,
        libraries=tuple(libraries),
        without_device_code=tuple(plain),
        duplicates=find_duplicates({path: k.size for path, k in kernels.items()}, framework, own),
        skips=tuple(skip),
    )
