"""A --wheelhouse the lock has outgrown is refused before anything is built (issue 32, item 8, "Day
2": a package added and relocked, the wheelhouse not topped up), with the missing wheels and the
`pip download` lines that fetch them; a wheel there with another sha256 is refused too.

A real lock, by `envbuild lock` against the two loopback indexes (torch 2.13.0's closure as the
framework index, app/lib/base wheels as the spec's), and a real wheelhouse of those indexes' files
with some left out. The printed `pip download` lines are then run, with pip, against the same
indexes: after them the check passes and render writes the context."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.read import load_lock
from envbuild.render.wheelgap import require_wheels, wheelhouse_gaps
from tests.helpers.locking import spec_text

BASE = "debian:bookworm-slim@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, indexes) -> Path:
    """A spec (app[fast], lib==2.0 over torch 2.13.0) and its envbuild.lock."""
    user, framework = indexes
    directory = tmp_path_factory.mktemp("outgrown")
    (directory / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    assert main(["lock", "-f", str(directory / "envbuild.toml"), "--base-image", BASE]) == 0
    return directory


def make_wheelhouse(
    directory: Path,
    user_wheels: Path,
    framework_wheels: Path,
    wheelhouse: Path,
    *,
    leave_out: tuple[str, ...],
) -> Path:
    """Every wheel both indexes serve and the uv wheel the images install with, but `leave_out`
    (file-name prefixes): what `pip download` put in a wheelhouse before the lock grew."""
    directory.mkdir()
    sources = [*framework_wheels.glob("*.whl"), *user_wheels.glob("*.whl"), *wheelhouse.glob("uv-*.whl")]
    for source in sources:
        if source.name.startswith(leave_out):
            continue
        try:
            os.link(source, directory / source.name)
        except OSError:
            shutil.copy(source, directory / source.name)
    return directory


def run_fix(error: str, wheelhouse: Path) -> None:
    """Run the error's `rm` and `pip download` lines as a user would, with pip alone: no pip
    configuration of this machine's (its mirror and find-links) in the way of the loopback indexes."""
    commands = [line.strip() for line in error.splitlines() if line.strip().startswith("pip download")]
    assert commands, error
    removed = [line for line in error.splitlines() if ": rm " in line]
    for line in removed:
        for path in shlex.split(line.split(": rm ", 1)[1]):
            os.unlink(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    for command in commands:
        words = shlex.split(command)
        assert words[words.index("-d") + 1] == str(wheelhouse)
        subprocess.run([sys.executable, "-m", *words, "--quiet"], check=True, env=env)


def test_an_outgrown_wheelhouse_stops_the_build_before_it_starts_and_the_fix_fetches_it(
    capsys,
    tmp_path: Path,
    project: Path,
    indexes,
    user_wheels: Path,
    framework_wheels: Path,
    wheelhouse: Path,
) -> None:
    user, framework = indexes
    house = make_wheelhouse(
        tmp_path / "wheelhouse", user_wheels, framework_wheels, wheelhouse, leave_out=("lib-2.0", "mpmath-")
    )
    out = tmp_path / "build"
    spec = str(project / "envbuild.toml")
    code = main(["build", "-f", spec, "-o", str(out), "--wheelhouse", str(house), "--smoke-device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists()  # nothing rendered, nothing built
    locked, _ = load_lock(str(project / "envbuild.lock"))
    versions = {p.name: p.version for p in locked.targets[0].packages}
    assert f"--wheelhouse {house} lacks 2 wheels envbuild.lock pins (the lock has outgrown it):" in err
    assert "target default (linux/amd64, Python 3.11), user layer:\n    - lib==2.0: missing" in err
    assert f"framework layer:\n    - mpmath=={versions['mpmath']}: missing" in err
    commands = [line.strip() for line in err.splitlines() if line.strip().startswith("pip download")]
    assert len(commands) == 2  # one per index: each package where the lock resolved it
    flags = (
        "pip download --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 "
        "--platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
    )
    assert f"{flags} --index-url {user.url} -d {house} lib==2.0" in commands
    assert f"{flags} --index-url {framework.url} -d {house} mpmath=={versions['mpmath']}" in commands

    run_fix(err, house)
    require_wheels(str(house), locked.targets)  # now complete, every sha256 the lock's
    code = main(["render", "-f", spec, "-o", str(out), "--wheelhouse", str(house)])
    assert code == 0, capsys.readouterr().err
    assert (out / "default" / "wheels" / "user" / "lib-2.0-py3-none-any.whl").is_file()


def test_a_wheel_with_another_sha256_differs_from_the_lock(
    capsys, tmp_path: Path, project: Path, user_wheels: Path, framework_wheels: Path, wheelhouse: Path
) -> None:
    house = make_wheelhouse(
        tmp_path / "wheelhouse", user_wheels, framework_wheels, wheelhouse, leave_out=("lib-2.0",)
    )
    name = "lib-2.0-py3-none-any.whl"
    with zipfile.ZipFile(user_wheels / name) as source, zipfile.ZipFile(house / name, "w") as copy:
        for item in source.infolist():  # the same files, stored uncompressed: other bytes
            copy.writestr(item.filename, source.read(item.filename))
    out = tmp_path / "out"
    code = main(["render", "-f", str(project / "envbuild.toml"), "-o", str(out), "--wheelhouse", str(house)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not (out / "default").exists()
    assert "has 1 wheel whose sha256 the lock does not pin" in err and "lacks" not in err
    assert "    - lib==2.0: lib-2.0-py3-none-any.whl differs from the lock" in err
    assert f": rm {house / 'lib-2.0-py3-none-any.whl'}" in err  # pip download keeps a file it finds

    run_fix(err, house)
    assert wheelhouse_gaps(str(house), load_lock(str(project / "envbuild.lock"))[0].targets) == []


def test_a_complete_wheelhouse_passes_and_an_unlocked_build_is_not_checked(
    capsys, tmp_path: Path, project: Path, user_wheels: Path, framework_wheels: Path, wheelhouse: Path
) -> None:
    house = make_wheelhouse(tmp_path / "wheelhouse", user_wheels, framework_wheels, wheelhouse, leave_out=())
    locked, _ = load_lock(str(project / "envbuild.lock"))
    assert wheelhouse_gaps(str(house), locked.targets) == []
    (house / "lib-2.0-py3-none-any.whl").unlink()
    unlocked = tmp_path / "unlocked"
    unlocked.mkdir()
    shutil.copy(project / "envbuild.toml", unlocked)  # no envbuild.lock: nothing pins a wheel
    code = main(
        [
            "render",
            "-f",
            str(unlocked / "envbuild.toml"),
            "-o",
            str(tmp_path / "o"),
            "--wheelhouse",
            str(house),
        ]
    )
    assert code == 0, capsys.readouterr().err
