"""`envbuild lock`, `lock --check` and `render` through [mirrors] (issue 38), against real loopback
indexes: the canonical sources the spec names are unreachable (or stopped), and a second loopback index
standing in for the mirror serves the same wheels. The lock records the canonical sources and the
mirrors it went through; `lock --check` and render need no flag; a lock made without mirrors still
checks once the spec gains them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
        assert "note: the lock was made through " in out and f"{canonical[0]} -> {user_mirror.url}" in out
        assert "the spec's [mirrors] now give no mirror" in out


def test_the_conda_layer_is_solved_through_the_channels_mirror_and_locked_canonical(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda-forge (by name: https://conda.anaconda.org/conda-forge, unreachable here) mapped to a
    loopback channel: the lock names conda-forge's URLs, and render's explicit files the mirror's."""
    from envbuild._testing.condachannel import stack_channel
    from envbuild.matrix.load import load_matrix
    from envbuild.plan.plan import build_plan
    from envbuild.spec.model import load_spec

    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    forge = "https://conda.anaconda.org/conda-forge"
    stack = (
        '[stack]\ndriver = "580"\ngpus = ["H100"]\nframework = "jax"\npython = "3.12"\nstrategy = "conda"\n'
    )
    site = '\n[site]\nbase-image = "mambaorg/micromamba:2.6.1@sha256:' + "b" * 64 + '"\n'
    (tmp_path / "probe.toml").write_text(stack + '\n[packages]\nconda = ["app"]\n')
    probe = load_spec(str(tmp_path / "probe.toml"))
    wanted = build_plan(load_matrix(), probe, probe.targets[0]).conda_framework
    channel = stack_channel(tmp_path / "channel", wanted, python="3.12")
    channel.index()
    project = tmp_path / "project"
    project.mkdir()
    with channel:
        (project / "envbuild.toml").write_text(
            stack + '\n[packages]\nconda = ["app"]\n' + f'\n[mirrors]\n"{forge}" = "{channel.url}"\n' + site
        )
        code, _, err = run_lock(capsys, project)
        assert code == 0, err
        locked, _ = load_lock(str(project / "envbuild.lock"))
        (target,) = locked.targets
        assert target.conda and all(
            p.channel == forge and p.url.startswith(forge + "/") for p in target.conda
        )
        assert locked.mirrors == (LockedMirror(source=forge, mirror=channel.url),)
        code, out, err = run_lock(capsys, project, "--check")
        assert code == 0 and "matches" in out, err
        out_dir = tmp_path / "out"
        assert main(["render", "-f", str(project / "envbuild.toml"), "-o", str(out_dir)]) == 0
        explicit = next(out_dir.rglob("conda-framework.txt")).read_text()
        assert f"{channel.url}/" in explicit and forge not in explicit
