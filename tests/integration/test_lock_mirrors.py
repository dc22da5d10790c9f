"""`envbuild lock`, `lock --check` and `render` through [mirrors] (issue 38), against real loopback
indexes: the canonical sources the spec names are unreachable (or stopped), and a second loopback index
standing in for the mirror serves the same wheels. The lock records the canonical sources and the
mirrors it went through; `lock --check` and render need no flag; a lock made without mirrors still
checks once the spec gains them.
"""

from __future__ import annotations

from pathlib import Path

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.lockfile.model import LockedMirror
from envbuild.lockfile.read import load_lock
from tests.helpers.locking import run_lock, spec_text

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
PYTORCH_CPU = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"
MIRROR_REGISTRY = "registry.internal/hub"


def _canonical_spec(framework_mirror: str, user_mirror: str) -> str:
    """A spec naming only canonical sources (the PyTorch CPU index, PyPI by default, Debian from
    Docker Hub), each mapped in [mirrors], and the base pinned in [site] base-image."""
    return (
        '[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = ["app[fast]", "lib==2.0"]\nframework-index-url = "{PYTORCH_CPU}"\n\n'
        "[mirrors]\n"
        f'"{PYTORCH_CPU}" = "{framework_mirror}"\n'
        f'"{PYPI}" = "{user_mirror}"\n'
        f'"docker.io" = "{MIRROR_REGISTRY}"\n\n'
        f'[site]\nbase-image = "{BASE}"\n'
    )


def test_lock_through_mirrors_records_canonical_sources_and_checks_with_no_flags(
    capsys, tmp_path: Path, user_wheels: Path, framework_wheels: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with PackageIndex(user_wheels) as user, PackageIndex(framework_wheels) as framework:
        spec = project / "envbuild.toml"
        spec.write_text(_canonical_spec(framework.url, user.url))
        code, out, err = run_lock(capsys, project)
        assert code == 0, err
        locked, intact = load_lock(str(project / "envbuild.lock"))
        assert intact
        (target,) = locked.targets
        packages = {p.name: p for p in target.packages}
        assert packages["torch"].index == PYTORCH_CPU  # canonical, though resolved on the mirror
        assert packages["lib"].index == PYPI
        assert target.base_image == BASE  # as the spec names it: the digest is the same on the mirror
        assert locked.mirrors == (
            LockedMirror(source="docker.io", mirror=MIRROR_REGISTRY),
            LockedMirror(source=PYTORCH_CPU, mirror=framework.url),
            LockedMirror(source=PYPI, mirror=user.url),
        )
        text = (project / "envbuild.lock").read_text()
        assert f'[[mirror]]\nsource = "{PYPI}"\nmirror = "{user.url}"\n' in text
        assert user.url not in text.split("[[target]]", 1)[1]  # the targets name no mirror

        code, out, err = run_lock(capsys, project, "--check")
        assert code == 0, err
        assert "matches" in out and "note:" not in out

        out_dir = tmp_path / "out"
        assert main(["render", "-f", str(spec), "-o", str(out_dir)]) == 0, capsys.readouterr().err
        dockerfile = next(out_dir.rglob("Dockerfile")).read_text()
        assert f"FROM {MIRROR_REGISTRY}/library/debian:bookworm-slim@sha256:{'a' * 64}" in dockerfile
        assert f"--index-url {framework.url}" in dockerfile and f"--index-url {user.url}" in dockerfile
        assert "download.pytorch.org" not in dockerfile and "pypi.org" not in dockerfile


def test_a_lock_made_without_mirrors_checks_once_the_spec_has_them(
    capsys, tmp_path: Path, user_wheels: Path, framework_wheels: Path
) -> None:
    """The canonical indexes are loopback ones here, so a lock can be made without mirrors; then the
    spec gains [mirrors] to two other indexes serving the same wheels, the canonical ones stop, and
    the lock still checks (re-resolved through the mirrors), saying which mirrors it was made without."""
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "envbuild.toml"
    with PackageIndex(user_wheels) as user_mirror, PackageIndex(framework_wheels) as framework_mirror:
        with PackageIndex(user_wheels) as user, PackageIndex(framework_wheels) as framework:
            plain = spec_text(user.url, framework.url) + f'\n[site]\nbase-image = "{BASE}"\n'
            spec.write_text(plain)
            code, _, err = run_lock(capsys, project)
            assert code == 0, err
            before = (project / "envbuild.lock").read_bytes()
            assert b"[[mirror]]" not in before
            canonical = user.url, framework.url
        # the canonical indexes are gone now: only the mirrors answer
        mirrors = f'"{canonical[0]}" = "{user_mirror.url}"\n"{canonical[1]}" = "{framework_mirror.url}"\n'
        spec.write_text(plain + "\n[mirrors]\n" + mirrors)
        code, out, err = run_lock(capsys, project, "--check")
        assert code == 0, err
        assert "matches" in out
        assert "note: the lock was made through no mirror; the spec's [mirrors] now give" in out
        assert f"{canonical[0]} -> {user_mirror.url}" in out
        code, out, err = run_lock(capsys, project)  # up to date: nothing resolved, the bytes kept
        assert code == 0, err
        assert "up to date" in out and (project / "envbuild.lock").read_bytes() == before

        (project / "envbuild.lock").unlink()  # relocked through the mirrors: the same lock plus [[mirror]]
        code, _, err = run_lock(capsys, project)
        assert code == 0, err
        after = (project / "envbuild.lock").read_text()
        assert "[[mirror]]" in after
        body = lambda text: text.split("[[target]]", 1)[1]  # noqa: E731
        assert body(after) == body(before.decode())

        spec.write_text(plain)  # the mirrors removed: the canonical sources still match, offline
        code, out, err = run_lock(capsys, project, "--check", "--offline")
        assert code == 0, err
        assert f"note: the lock was made through {canonical[0]} -> {user_mirror.url}" in out
