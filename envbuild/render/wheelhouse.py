"""Split an air-gapped wheelhouse into the framework's closure and everything else.

Each part is bind-mounted into its own RUN, so a new wheel for a user package changes only the
user layer's inputs: the framework layer, gigabytes with its CUDA wheels, stays cached.

One wheelhouse may serve several platforms (`pip download --platform` once per platform into one
directory): each context gets only the wheels that install on its image's platform (a pure-Python
wheel, or a binary one for its machine), and markers are evaluated for that machine.
"""

from __future__ import annotations

import os
import re
import zipfile
from email.parser import HeaderParser

from envbuild._util.wheelzip import checked_members, member_bound
from envbuild.errors import UsageError
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.platforms import platform as platform_named
from envbuild.plan.cudalayer import is_cuda_package

_WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def target_environment(python: str, image_platform: str = DEFAULT_PLATFORM) -> dict[str, str]:
    """Marker values of the image (linux CPython on its platform's machine), not of the host running
    envbuild."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": platform_named(image_platform).machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_version": "",
        "implementation_version": f"{python}.0",
    }


def _requires(path: str) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            where = f"--wheelhouse: {path}"
            members = checked_members(archive, where, os.path.getsize(path))
            meta = next((m for m in members if m.filename.endswith(".dist-info/METADATA")), None)
            if meta is None:
                return []
            member_bound(meta, where)
            headers = HeaderParser().parsestr(archive.read(meta).decode("utf-8", "replace"))
    except (zipfile.BadZipFile, OSError) as exc:
        bad_zip = isinstance(exc, zipfile.BadZipFile)
        reason = "it is not a zip archive" if bad_zip else exc.strerror or str(exc)
        raise UsageError(
            f"--wheelhouse: {path} is not a readable wheel ({reason})",
            fix="remove it and download it again with `pip download`",
        ) from None
    return headers.get_all("Requires-Dist") or []


def installs_on(filename: str, image_platform: str) -> bool:
    """Whether the wheel `filename` installs on a Linux image of `image_platform`: its platform tag
    (each of a compressed `manylinux2014_x86_64.manylinux_2_17_x86_64` set) is `any` or a Linux tag
    for the platform's machine."""
    tags = filename[: -len(".whl")].rsplit("-", 1)[-1].split(".")
    machine = platform_named(image_platform).machine
    return any(
        tag == "any" or (tag.startswith(("manylinux", "musllinux", "linux")) and tag.endswith(f"_{machine}"))
        for tag in tags
    )


def wheel_files(directory: str, image_platform: str | None = None) -> list[str]:
    """The *.whl names in the wheelhouse, each a regular file (a directory named x.whl is refused);
    with `image_platform`, only those that install on it."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise UsageError(
            f"--wheelhouse {directory}: cannot read it ({exc.strerror or exc})",
            fix="pass a readable directory of wheels",
        ) from None
    wheels = [name for name in names if name.endswith(".whl")]
    for name in wheels:
        path = os.path.join(directory, name)
        problem = "is not a file" if not os.path.isfile(path) else ""
        if not problem and os.path.getsize(path) == 0:
            problem = "is empty"
        if problem:
            raise UsageError(
                f"--wheelhouse: {path} {problem}",
                fix="remove it: a wheelhouse holds only the .whl files `pip download` wrote",
            )
    if image_platform is not None:
        wheels = [name for name in wheels if installs_on(name, image_platform)]
    return wheels


def require_directory(directory: str) -> None:
    if not os.path.isdir(directory):
        raise UsageError(
            f"--wheelhouse {directory} is not a directory",
            fix="make one with `pip download -d DIR ...` for the image's Python and platform",
        )


def framework_closure(
    directory: str, requirements: tuple[str, ...], python: str, image_platform: str = DEFAULT_PLATFORM
) -> set[str]:
    """File names of the wheels the framework requirements pull in, for the image's platform."""
    from packaging.requirements import InvalidRequirement, Requirement

    wheels: dict[str, list[str]] = {}
    for filename in wheel_files(directory, image_platform):
        match = _WHEEL_RE.match(filename)
        if match:
            wheels.setdefault(canonical(match.group("name")), []).append(filename)
    environment = target_environment(python, image_platform)
    wanted: list[tuple[str, frozenset[str]]] = []
    for text in requirements:
        requirement = Requirement(text)
        wanted.append((canonical(requirement.name), frozenset(requirement.extras)))
    chosen: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    while wanted:
        name, extras = wanted.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for filename in wheels.get(name, []):
            chosen.add(filename)
            for line in _requires(os.path.join(directory, filename)):
                try:
                    dependency = Requirement(line)
                except InvalidRequirement:
                    continue
                marker = dependency.marker
                active = marker is None or any(
                    marker.evaluate({**environment, "extra": extra}) for extra in (extras or {""})
                )
                if active:
                    wanted.append((canonical(dependency.name), frozenset(dependency.extras)))
    return chosen


def split_wheelhouse(
    directory: str,
    destination: str,
    requirements: tuple[str, ...],
    python: str,
    *,
    cuda: bool = False,
    image_platform: str = DEFAULT_PLATFORM,
) -> None:
    """Copy (hard-link where possible) into destination/framework and destination/user the wheels that
    install on `image_platform`; with `cuda`, the framework's CUDA wheels (envbuild.plan.cudalayer)
    into destination/cuda, the CUDA layer's only wheel input, which a framework patch release leaves
    unchanged."""
    require_directory(directory)
    closure = framework_closure(directory, requirements, python, image_platform)
    framework_names = {
        canonical(r.split("[")[0].split("=")[0].split("<")[0].split(">")[0]) for r in requirements
    }
    if not any(canonical(_WHEEL_RE.match(f).group("name")) in framework_names for f in closure):  # type: ignore[union-attr]
        raise UsageError(
            f"--wheelhouse {directory} has no wheel for {', '.join(requirements)} that installs on "
            f"{image_platform}",
            fix="pip download the framework into it for the image's Python and platform (--python-version "
            f"{python}, {' '.join(f'--platform {t}' for t in platform_named(image_platform).wheel_tags)} "
            "--only-binary=:all:)",
        )
    parts = ("framework", "user", "cuda") if cuda else ("framework", "user")
    for part in parts:
        os.makedirs(os.path.join(destination, part), exist_ok=True)
    for filename in wheel_files(directory, image_platform):
        source = os.path.join(directory, filename)
        part = "framework" if filename in closure else "user"
        if cuda and part == "framework" and is_cuda_package(filename.split("-")[0]):
            part = "cuda"
        target = os.path.join(destination, part, filename)
        try:
            os.link(source, target)
        except OSError:
            import shutil

            shutil.copyfile(source, target)
