"""The base image through a registry mirror (issue 38), on the real registry: the spec and the matrix
name Docker Hub's debian:bookworm-slim, [mirrors] maps it to a repository on 127.0.0.1:5000 holding
the same image, and the lock pins the mirror's digest under the canonical name; `lock --check` and
render need no flag. A lock made the old way (--base-image naming the mirror) renders once the spec
maps the mirror, with no flag either. No image is built: the digest lookups and the FROM are the point."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.model import LockedMirror
from envbuild.lockfile.read import load_lock
from tests.helpers.docker import docker
from tests.helpers.locking import run_lock, spec_text
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/mirror-lock-test/debian"  # unique to this test


@pytest.fixture
def mirrored_debian(bookworm_image: str, anonymous_registry: str):
    ref = f"{anonymous_registry}/{REPOSITORY}:bookworm-slim"
    docker("tag", bookworm_image, ref)
    push(ref)
    yield (
        f"{anonymous_registry}/{REPOSITORY}",
        manifest_digest(anonymous_registry, REPOSITORY, "bookworm-slim"),
    )
    docker("rmi", ref, check=False)


def _render(capsys, project: Path) -> str:
    out = project / "out"
    code = main(["render", "-f", str(project / "envbuild.toml"), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    return (out / "default" / "Dockerfile").read_text()


def test_the_lock_pins_the_base_through_its_mirror_and_render_needs_no_flag(
    capsys, tmp_path: Path, indexes, mirrored_debian
) -> None:
    mirror, digest = mirrored_debian
    user, framework = indexes
    plain = spec_text(user.url, framework.url, '["lib==2.0"]')
    mirrors = f'\n[mirrors]\n"docker.io/library/debian" = "{mirror}"\n'
    spec = tmp_path / "envbuild.toml"
    spec.write_text(plain + mirrors)

    code, _, err = run_lock(capsys, tmp_path)
    assert code == 0, err
    locked, intact = load_lock(str(tmp_path / "envbuild.lock"))
    assert intact
    assert locked.targets[0].base_image == f"debian:bookworm-slim@{digest}"  # the mirror's digest
    assert locked.mirrors == (LockedMirror(source="docker.io/library/debian", mirror=mirror),)
    code, out, err = run_lock(capsys, tmp_path, "--check")
    assert code == 0 and "matches" in out, err
    assert f"FROM {mirror}:bookworm-slim@{digest}\n" in _render(capsys, tmp_path)

    # a lock made before [mirrors]: --base-image named the mirror, and the lock pins the mirror's name
    (tmp_path / "envbuild.lock").unlink()
    spec.write_text(plain)
    code, _, err = run_lock(capsys, tmp_path, "--base-image", f"{mirror}:bookworm-slim")
    assert code == 0, err
    assert (
        load_lock(str(tmp_path / "envbuild.lock"))[0].targets[0].base_image
        == f"{mirror}:bookworm-slim@{digest}"
    )
    spec.write_text(plain + mirrors)  # the spec now says what the mirror is: no flag needed
    code, out, err = run_lock(capsys, tmp_path, "--check")
    assert code == 0 and "matches" in out, err
    assert f"FROM {mirror}:bookworm-slim@{digest}\n" in _render(capsys, tmp_path)
