"""`envbuild vendor`: fetch everything the lock pins into a bundle, from the lock alone.

For each vendored lock entry (a target on one platform): each locked wheel (found on its index's
project page by its sha256 and its tags), uv's wheel for the platform (when the spec's installer is
uv), each conda package file, and the base image by digest. Every URL goes through the spec's
[mirrors]; bundle.json records the canonical source. A file two targets share is stored once.
"""

from __future__ import annotations

import os

from envbuild._util import limits
from envbuild._util.progress import SILENT, Progress
from envbuild._util.record import TYPE_CHECKING, Record
from envbuild.errors import EnvbuildError, UsageError
from envbuild.vendor.manifest import BundleFile, BundleTarget, Manifest, write_manifest

if TYPE_CHECKING:
    from envbuild.lockfile.model import Lock, LockedPackage, LockedTarget
    from envbuild.spec.model import Spec
    from envbuild.vendor.download import Tally
    from envbuild.vendor.index import IndexFile
    from envbuild.vendor.session import Session


class Summary(Record):
    __slots__ = ("bundle", "files", "bytes", "fetched", "kept", "fetched_bytes")
    bundle: str
    files: int  # files the manifest lists
    bytes: int
    fetched: int  # of them downloaded by this run
    kept: int  # already there with the right hash
    fetched_bytes: int

    def line(self) -> str:
        return (
            f"bundle {self.bundle}: {self.files} files, {limits.size(self.bytes)} "
            f"({self.fetched} fetched, {limits.size(self.fetched_bytes)}; {self.kept} already there)"
        )


def entries_for(lock: Lock, target: str | None) -> tuple[LockedTarget, ...]:
    """The lock's entries to vendor: all, or target `target`'s (one per platform)."""
    if target is None:
        return lock.targets
    chosen = tuple(entry for entry in lock.targets if entry.name == target)
    if not chosen:
        names = ", ".join(dict.fromkeys(entry.name for entry in lock.targets))
        raise UsageError(
            f"--target {target}: envbuild.lock has no such target (it locks {names})",
            fix="name a locked target, or run `envbuild lock` after adding it to envbuild.toml",
        )
    return chosen


class _Run:
    def __init__(self, spec: Spec, out: str, session: Session, tally: Tally) -> None:
        self.spec = spec
        self.mirrors = spec.mirrors
        self.out = out
        self.session = session
        self.tally = tally
        self.files: dict[str, BundleFile] = {}
        self.pages: dict[tuple[str, str], list[IndexFile]] = {}

    def add(self, file: BundleFile) -> None:
        had = self.files.get(file.path)
        if had is not None and had.sha256 != file.sha256:
            raise EnvbuildError(
                f"{file.path}: two locked files of one name differ ({had.source} has sha256 {had.sha256}, "
                f"{file.source} has {file.sha256})",
                fix="the indexes serve different files under one name; lock against one of them",
            )
        self.files.setdefault(file.path, file)

    def fetch(self, relative: str, kind: str, accepted: frozenset[str], url: str, label: str) -> None:
        """The file at canonical `url` (fetched through the mirrors) into `relative`."""
        from envbuild.vendor.download import sha256_of, store, url_pieces

        if relative in self.files and self.files[relative].sha256 in accepted:
            return  # a file two targets share: stored once
        path = os.path.join(self.out, *relative.split("/"))
        pulled = self.mirrors.url(url)
        size = store(
            path,
            accepted,
            url_pieces(self.session, pulled, what=label),
            label=label,
            source=pulled,
            tally=self.tally,
        )
        sha256 = next(iter(accepted)) if len(accepted) == 1 else sha256_of(path)
        self.add(
            BundleFile(
                path=relative, kind=kind, sha256=sha256, size=size, source=self.mirrors.canonical_url(url)
            )
        )

    def page(self, index: str, project: str) -> list[IndexFile]:
        from envbuild.vendor.index import project_files

        key = (index, project)
        if key not in self.pages:
            self.pages[key] = project_files(self.session, self.mirrors.url(index), project)
        return self.pages[key]

    def wheel(self, entry: LockedTarget, package: LockedPackage) -> None:
        from envbuild.lockfile.model import canonical
        from envbuild.vendor.tags import normal_version, release_of, wheel_suits

        hashes = frozenset(h.removeprefix("sha256:") for h in package.hashes)
        wanted = (canonical(package.name), normal_version(package.version))
        suiting = [
            f
            for f in self.page(package.index, canonical(package.name))
            if f.filename.endswith(".whl")
            and release_of(f.filename) == wanted
            and wheel_suits(f.filename, entry.platform, entry.python)
        ]
        listed = sorted((f for f in suiting if f.sha256 in hashes), key=lambda f: f.filename)
        unstated = sorted((f for f in suiting if f.sha256 is None), key=lambda f: f.filename)
        label = f"{package.name}=={package.version} ({entry.name}, {entry.platform})"
        if listed:
            chosen = listed[0]
            accepted = frozenset((chosen.sha256,))  # type: ignore[arg-type]
        elif unstated:  # a page without hashes: the lock's decide, once the file is here
            chosen, accepted = unstated[0], hashes
        else:
            raise EnvbuildError(
                f"{label}: {package.index} lists no wheel of it whose sha256 the lock pins for "
                f"{entry.platform} and Python {entry.python}"
                + (
                    f" (it lists {', '.join(f.filename for f in suiting)} with other hashes)"
                    if suiting
                    else ""
                ),
                fix="the index changed since the lock was written: run `envbuild lock --check`, and relock",
            )
        url = self.mirrors.canonical_url(chosen.url)
        self.fetch(f"wheels/{chosen.filename}", "wheel", accepted, url, label)

    def uv(self, image_platform: str) -> None:
        from envbuild.vendor.uvwheel import find_uv_wheel

        wheel = find_uv_wheel(self.session, self.spec.packages.index_url, self.mirrors, image_platform)
        self.fetch(
            f"wheels/{wheel.filename}", "uv", frozenset((wheel.sha256,)), wheel.url, f"uv {wheel.filename}"
        )

    def conda(self, entry: LockedTarget) -> None:
        from urllib.parse import unquote, urlsplit

        from envbuild.vendor.manifest import safe_path

        for package in entry.conda:
            name = unquote(urlsplit(package.url).path.rsplit("/", 1)[-1])
            relative = safe_path(f"conda/{package.subdir}/{name}")
            if relative is None:
                raise EnvbuildError(
                    f"conda package {package.name}: its URL {package.url} names no plain file",
                    fix="relock (`envbuild lock`) against the channel",
                )
            self.fetch(
                relative,
                "conda",
                frozenset((package.sha256.removeprefix("sha256:"),)),
                package.url,
                f"conda {package.name}-{package.version} ({entry.name}, {entry.platform})",
            )


def vendor(
    spec: Spec,
    lock: Lock,
    lock_digest: str,
    out: str,
    *,
    target: str | None = None,
    progress: Progress = SILENT,
) -> Summary:
    """Fetch what `lock` pins for `target` (None: every target) into the bundle `out`, and write its
    bundle.json last. Files already there with the right hash are kept."""
    from envbuild import __version__
    from envbuild.vendor.download import Tally
    from envbuild.vendor.layout import vendor_image, write_layout
    from envbuild.vendor.session import Session

    entries = entries_for(lock, target)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"-o {out} is not a directory", fix="name a new or existing bundle directory")
    os.makedirs(out, exist_ok=True)
    tally = Tally(progress)
    session = Session()
    run = _Run(spec, out, session, tally)
    try:
        for entry in entries:
            for package in entry.packages:
                run.wheel(entry, package)
        if spec.image.installer == "uv":
            for image_platform in dict.fromkeys(entry.platform for entry in entries):
                run.uv(image_platform)
        for entry in entries:
            run.conda(entry)
        descriptors = []
        for entry in {(e.base_image, e.platform): e for e in entries}.values():  # a shared base once
            descriptor, blobs = vendor_image(
                entry.base_image, spec.mirrors.image(entry.base_image), entry.platform, out, tally
            )
            descriptors.append(descriptor)
            for blob in blobs:
                run.add(blob)
    finally:
        session.close()
        progress.close()
    write_layout(out, descriptors)
    targets = tuple(BundleTarget(name=e.name, platform=e.platform, base_image=e.base_image) for e in entries)
    files = tuple(run.files.values())
    write_manifest(out, Manifest(envbuild=__version__, lock_digest=lock_digest, targets=targets, files=files))
    return Summary(
        bundle=out,
        files=len(files),
        bytes=sum(f.size for f in files),
        fetched=tally.fetched,
        kept=tally.kept,
        fetched_bytes=tally.fetched_bytes,
    )


def vendor_spec(
    spec_path: str, out: str, *, target: str | None = None, progress: Progress = SILENT
) -> Summary:
    """`envbuild vendor -f SPEC`: the spec and the envbuild.lock beside it (no lock: exit 2)."""
    from envbuild.lockfile.model import lock_path
    from envbuild.lockfile.read import read_lock
    from envbuild.spec.model import load_spec

    spec = load_spec(spec_path)
    path = lock_path(spec_path)
    if not os.path.exists(path):
        raise UsageError(
            f"{path} does not exist: vendor fetches what the lock pins",
            fix=f"run `envbuild lock -f {spec_path}` first",
        )
    read = read_lock(path)
    return vendor(spec, read.lock, read.digest, out, target=target, progress=progress)
