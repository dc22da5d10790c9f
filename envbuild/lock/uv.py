"""The uv side of locking: resolve one layer's closure for the target platform, export PEP 751.

uv (not pip) resolves, because it evaluates environment markers for the *target* platform
(`--python-platform`: linux x86_64 or aarch64, from envbuild.matrix.platforms, at the target's
Python) instead of the host's, and hashes the wheels of that platform.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

from envbuild._util.files import write_atomic
from envbuild.errors import EnvbuildError
from envbuild.lockfile.model import Lock, LockedPackage, LockedTarget, canonical, toml_string
from envbuild.matrix.platforms import DEFAULT_PLATFORM
from envbuild.matrix.platforms import platform as platform_named

# The interpreter uv resolves with: envbuild's own. The target's version and platform come from
# --python-version and --python-platform; without --python, uv searches every interpreter on the host
# for one of the target's version first (11 s on a pyenv host for a Python it lacks), for nothing.
RESOLVING_INTERPRETER = ("--python", sys.executable)


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        found = shutil.which("uv")
        if found:
            return found
    raise EnvbuildError("uv is not installed", fix="pip install uv (envbuild depends on it for locking)")


def parse_compiled(text: str) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    """(name, version, index, hashes) from `uv pip compile --generate-hashes --emit-index-annotation`."""
    entries: list[tuple[str, str, str | None, tuple[str, ...]]] = []
    current: list | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", line)
        if match and not raw.startswith((" ", "\t")):
            current = [canonical(match.group(1)), match.group(3), None, []]
            entries.append(current)  # type: ignore[arg-type]
            continue
        if current is None:
            continue
        for digest in re.findall(r"--hash=(sha256:[0-9a-f]{64})", line):
            current[3].append(digest)
        if line.startswith("# from "):
            current[2] = line[len("# from ") :].strip()
    return [(name, version, index, tuple(sorted(hashes))) for name, version, index, hashes in entries]


def compile_layer(
    requirements: tuple[str, ...],
    constraints: tuple[str, ...],
    *,
    python: str,
    index: str,
    extra_indexes: tuple[str, ...] = (),
    find_links: str | None = None,
    preferences: tuple[str, ...] = (),
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    during: str = "locking",
    platform: str = DEFAULT_PLATFORM,
) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    """One layer's closure for `platform` ("linux/arm64": markers, wheels and hashes of that
    platform): (name, version, index, hashes) per package. `during` ("locking target
    default, framework layer") goes into the error when uv fails, which names the cause uv gives."""
    if not requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="envbuild-lock-") as workdir:
        paths = {}
        for name, lines in (
            ("requirements.in", requirements),
            ("constraints.txt", constraints),
            ("requirements.txt", preferences),
        ):
            paths[name] = os.path.join(workdir, name)
            with open(paths[name], "w", encoding="utf-8") as handle:
                handle.writelines(f"{line}\n" for line in lines)
        command = [
            uv_binary(),
            "pip",
            "compile",
            paths["requirements.in"],
            "-c",
            paths["constraints.txt"],
            "-o",
            paths["requirements.txt"],
            "--python-platform",
            platform_named(platform).uv_platform,
            "--python-version",
            python,
            *RESOLVING_INTERPRETER,
            "--generate-hashes",
            "--emit-index-annotation",
            "--no-header",
            "--quiet",
            "--index-url",
            index,
        ]
        for url in extra_indexes:
            command += ["--extra-index-url", url]
        if find_links:
            command += ["--find-links", find_links]
        if upgrade:
            command.append("--upgrade")
        for package in upgrade_packages:
            command += ["--upgrade-package", package]
        env = {**os.environ, "UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            from envbuild.lock.uvfail import uv_failure

            raise uv_failure(
                done.stderr,
                during=during,
                indexes=(index, *extra_indexes, *([find_links] if find_links else [])),
                requirements=requirements,
            )
        with open(paths["requirements.txt"], encoding="utf-8") as handle:
            compiled = parse_compiled(handle.read())
        files = _platform_files(
            compiled,
            workdir,
            python=python,
            platform=platform,
            indexes=(index, *extra_indexes),
            find_links=find_links,
            during=during,
        )
        return [
            (name, version, source, _keep_platform(hashes, files.get(name), python, platform))
            for name, version, source, hashes in compiled
        ]


def _platform_files(
    compiled: list[tuple[str, str, str | None, tuple[str, ...]]],
    workdir: str,
    *,
    python: str,
    platform: str,
    indexes: tuple[str, ...],
    find_links: str | None,
    during: str,
) -> dict[str, list[tuple[str, str]]]:
    """{package: [(file name, "sha256:...")]} of the files uv lists for the locked pins, from the same
    indexes: `uv pip compile --generate-hashes` writes the hash of *every* file of a version (all
    platforms and Pythons, astral-sh/uv#3516), and only its PEP 751 output names the file of each."""
    from envbuild._util import toml

    if not compiled:
        return {}
    pins = os.path.join(workdir, "pins.txt")
    with open(pins, "w", encoding="utf-8") as handle:
        handle.writelines(f"{name}=={version}\n" for name, version, _, _ in compiled)
    output = os.path.join(workdir, "pylock.toml")
    command = [uv_binary(), "pip", "compile", pins, "--no-deps", "--format", "pylock.toml", "-o", output]
    command += ["--python-platform", platform_named(platform).uv_platform, "--python-version", python]
    command += [*RESOLVING_INTERPRETER, "--no-header", "--quiet", "--index-url", indexes[0]]
    for url in indexes[1:]:
        command += ["--extra-index-url", url]
    if find_links:
        command += ["--find-links", find_links]
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        from envbuild.lock.uvfail import uv_failure

        raise uv_failure(
            done.stderr,
            during=f"{during} (listing the files of {platform})",
            indexes=(*indexes, *([find_links] if find_links else [])),
            requirements=tuple(f"{name}=={version}" for name, version, _, _ in compiled),
        )
    with open(output, encoding="utf-8") as handle:
        document = toml.loads(handle.read())
    files: dict[str, list[tuple[str, str]]] = {}
    for package in document.get("packages") or []:
        artifacts = list(package.get("wheels") or [])
        if package.get("sdist"):
            artifacts.append(package["sdist"])
        for artifact in artifacts:
            location = str(artifact.get("name") or artifact.get("url") or artifact.get("path") or "")
            digest = (artifact.get("hashes") or {}).get("sha256")
            if location and digest:
                filename = location.rsplit("/", 1)[-1].split("#", 1)[0]
                files.setdefault(canonical(str(package.get("name"))), []).append(
                    (filename, f"sha256:{digest}")
                )
    return files


def _keep_platform(
    hashes: tuple[str, ...], files: list[tuple[str, str]] | None, python: str, platform: str
) -> tuple[str, ...]:
    """The hashes of the files the image can install: wheels for `platform` at CPython `python` (and
    any sdist). A hash whose file uv did not name is dropped; when nothing would be left (a file
    name envbuild cannot read), uv's list is kept as it is, a superset that still installs."""
    if not files:
        return hashes
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_wheel_filename

    supported = _supported_tags(python, platform)
    keep = set()
    for filename, digest in files:
        if not filename.endswith(".whl"):
            keep.add(digest)  # an sdist builds on any platform
            continue
        try:
            tags = parse_wheel_filename(filename)[3]
        except (InvalidWheelFilename, InvalidSdistFilename):
            keep.add(digest)
            continue
        if tags & supported:
            keep.add(digest)
    kept = tuple(h for h in hashes if h in keep)
    return kept or hashes


def _supported_tags(python: str, platform: str) -> frozenset:
    """The wheel tags CPython `python` on glibc 2.28 `platform` installs (uv's manylinux_2_28 target):
    manylinux_2_5 to 2_28, the legacy manylinux names, and linux_<machine>."""
    from packaging import tags

    machine = platform_named(platform).machine
    version = tuple(int(part) for part in python.split(".")[:2])
    names = [f"manylinux_2_{minor}_{machine}" for minor in range(28, 4, -1)]
    names += [f"manylinux{legacy}_{machine}" for legacy in ("2014", "2010", "1")]
    names.append(f"linux_{machine}")
    return frozenset(
        [
            *tags.cpython_tags(version, platforms=names),
            *tags.compatible_tags(version, interpreter=f"cp{version[0]}{version[1]}", platforms=names),
        ]
    )


def export_pylock(target: LockedTarget) -> str:
    """PEP 751 `pylock.<target>.toml`: the locked versions, with each wheel's URL, size and hash.

    uv writes the artifacts: it is given the exact locked pins (no dependency resolution) per index
    the lock recorded, and envbuild adds each package's `index` and checks the versions came back as
    locked.
    """
    by_index: dict[str, list[LockedPackage]] = {}
    for package in target.packages:
        by_index.setdefault(package.index, []).append(package)
    blocks: list[str] = []
    for index, packages in sorted(by_index.items()):
        with tempfile.TemporaryDirectory(prefix="envbuild-pylock-") as workdir:
            pins = os.path.join(workdir, "pins.txt")
            output = os.path.join(workdir, "pylock.toml")
            with open(pins, "w", encoding="utf-8") as handle:
                handle.writelines(f"{p.name}=={p.version}\n" for p in packages)
            command = [
                uv_binary(),
                "pip",
                "compile",
                pins,
                "--no-deps",
                "--format",
                "pylock.toml",
                "-o",
                output,
                "--python-platform",
                platform_named(target.platform).uv_platform,
                "--python-version",
                target.python,
                *RESOLVING_INTERPRETER,
                "--no-header",
                "--quiet",
                "--index-url",
                index,
            ]
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"},
            )
            if done.returncode != 0:
                from envbuild.lock.uvfail import uv_failure

                raise uv_failure(
                    done.stderr,
                    during=f"exporting target {target.name} to PEP 751",
                    indexes=(index,),
                    requirements=tuple(f"{p.name}=={p.version}" for p in packages),
                    conflict_fix="the index no longer serves a version envbuild.lock pins: relock with "
                    "`envbuild lock --upgrade PKG` for the package uv names",
                )
            with open(output, encoding="utf-8") as handle:
                text = handle.read()
        for block in text.split("\n[[packages]]\n")[1:]:
            name = re.search(r'^name = "([^"]+)"', block, re.M)
            version = re.search(r'^version = "([^"]+)"', block, re.M)
            locked = {p.name: p.version for p in packages}
            if not name or not version or locked.get(canonical(name.group(1))) != version.group(1):
                raise EnvbuildError(
                    f"uv exported {block.splitlines()[0]} for {target.name}, not the locked version"
                )
            blocks.append(
                block.rstrip("\n").replace(
                    f'version = "{version.group(1)}"',
                    f'version = "{version.group(1)}"\nindex = {toml_string(index)}',
                    1,
                )
            )
    blocks.sort(key=lambda b: b.split("\n", 1)[0])
    header = [
        'lock-version = "1.0"',
        f"created-by = {toml_string('envbuild')}",
        f"requires-python = {toml_string('==' + target.python + '.*')}",
        "environments = [\"sys_platform == 'linux' and platform_machine == "
        f"'{platform_named(target.platform).machine}'\"]",
    ]
    return "\n".join(header) + "\n" + "".join(f"\n[[packages]]\n{b}\n" for b in blocks)


def pylock_name(target: str, platform: str | None = None) -> str:
    """PEP 751 names have no dots: pylock.<name>.toml, or pylock.<name>-<arch>.toml for one platform
    of a target that is not amd64-only (each platform's entry is a file of its own)."""
    suffix = f"-{platform_named(platform).architecture}" if platform else ""
    return f"pylock.{target.replace('.', '-')}{suffix}.toml"


def write_pylocks(lock: Lock, lock_file: str) -> list[str]:
    """`envbuild lock --pylock`: a PEP 751 file for every target and platform, next to the lock
    file; their paths."""
    written = []
    for target in lock.targets:
        several = lock.platforms(target.name) != (DEFAULT_PLATFORM,)
        name = pylock_name(target.name, target.platform if several else None)
        out = os.path.join(os.path.dirname(lock_file), name)
        write_atomic(out, export_pylock(target))
        written.append(out)
    return written
