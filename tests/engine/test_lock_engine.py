"""A lock on the real registry and Engine: the base image pinned by digest, and a tampered hash
refused before the build (the wheelhouse checked against the lock) and failing the build itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.lockfile.read import load_lock
from tests.helpers.docker import docker
from tests.helpers.locking import run_lock, spec_text
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker


@pytest.fixture
def pushed_base(bookworm_image: str, anonymous_registry: str):
    ref = f"{anonymous_registry}/envbuild-test/lock-base:latest"
    docker("tag", bookworm_image, ref)
    push(ref)
    yield ref, anonymous_registry
    docker("rmi", ref, check=False)


def test_locked_build_checks_hashes_and_a_tampered_one_fails(
    capsys, tmp_path: Path, framework_wheels: Path, wheelhouse: Path, pushed_base
) -> None:
    ref, registry = pushed_base
    user_dir = tmp_path / "user-wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "six==1.16.0", "-d", str(user_dir)],
        check=True,
    )
    uv_wheel = next(wheelhouse.glob("uv-*.whl"))  # the installer the images use (issue 18)
    wheelhouse = tmp_path / "wheelhouse"
    shutil.copytree(framework_wheels, wheelhouse)
    shutil.copy(next(user_dir.glob("six-*.whl")), wheelhouse)
    shutil.copy(uv_wheel, wheelhouse)
    with PackageIndex(user_dir) as user, PackageIndex(framework_wheels) as framework:
        (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url, '["six==1.16.0"]'))
        assert run_lock(capsys, tmp_path, "--base-image", ref)[0] == 0
    locked, _ = load_lock(str(tmp_path / "envbuild.lock"))
    digest = manifest_digest(registry, "envbuild-test/lock-base", "latest")
    assert locked.targets[0].base_image == f"{ref}@{digest}"

    def build(tag: str, *extra: str) -> subprocess.CompletedProcess[str]:
        out = tmp_path / "build"
        assert (
            main(
                [
                    "render",
                    "-f",
                    str(tmp_path / "envbuild.toml"),
                    "-o",
                    str(out),
                    "--wheelhouse",
                    str(wheelhouse),
                    "--base-image",  # the mirror it was locked with: the lock pins its digest
                    ref,
                    *extra,
                ]
            )
            == 0
        )
        capsys.readouterr()
        dockerfile = (out / "default" / "Dockerfile").read_text()
        assert f"FROM {ref}@{digest}" in dockerfile
        assert "/opt/envbuild-uv/uv pip install" in dockerfile
        assert "pip install --no-cache-dir" not in dockerfile
        return docker("build", "--progress=plain", "-t", tag, str(out / "default"), check=False)

    good = build("envbuild-test/locked:good")
    try:
        assert good.returncode == 0, good.stderr[-3000:]
        ran = docker(
            "run",
            "--rm",
            "--network",
            "none",
            "envbuild-test/locked:good",
            "python",
            "-c",
            "import torch, six; print(torch.__version__, six.__version__)",
        )
        assert ran.stdout.split()[1] == "1.16.0"
    finally:
        docker("rmi", "-f", "envbuild-test/locked:good", check=False)

    path = tmp_path / "envbuild.lock"
    six = next(p for p in locked.targets[0].packages if p.name == "six")
    forged = "sha256:" + "0" * 64
    path.write_text(path.read_text().replace(six.hashes[0], forged))
    # render refuses a hand-edited lock; overridden for an emergency, the wheelhouse is checked against
    # it before anything is written: its six wheel is not the one the edited lock pins (issue 32)
    assert main(["render", "-f", str(tmp_path / "envbuild.toml"), "-o", str(tmp_path / "refused")]) == 1
    assert "edited by hand" in capsys.readouterr().err
    args = ["-o", str(tmp_path / "edited"), "--wheelhouse", str(wheelhouse), "--base-image", ref]
    assert main(["render", "-f", str(tmp_path / "envbuild.toml"), *args, "--allow-edited-lock"]) == 2
    err = capsys.readouterr().err
    assert "six==1.16.0: six-1.16.0-py2.py3-none-any.whl differs from the lock" in err
    assert not (tmp_path / "edited" / "default").exists()
    # and inside the build uv judges every hash itself: the good context with that pin fails there
    requirements = tmp_path / "build" / "default" / "requirements.txt"
    requirements.write_text(requirements.read_text().replace(six.hashes[0], forged))
    context = str(tmp_path / "build" / "default")
    bad = docker("build", "--progress=plain", "-t", "envbuild-test/locked:bad", context, check=False)
    docker("rmi", "-f", "envbuild-test/locked:bad", check=False)
    assert bad.returncode != 0
    log = bad.stdout + bad.stderr
    assert "Hash mismatch for `six==1.16.0`" in log
