"""Issue 21: `envbuild lock` solves the conda layer of a conda-strategy target, and `lock --check`
and `lock --upgrade` cover it, against a real conda channel on loopback (real `.tar.bz2` packages
indexed by rattler's own indexer, served over HTTP) holding what a jax conda spec asks for.

No Docker: the micromamba base is given with its digest, and the spec has no pip packages, so no
Python index is asked either.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._testing.condachannel import CondaChannel, stack_channel
from envbuild.lockfile.read import load_lock
from envbuild.matrix.load import load_matrix
from envbuild.plan.plan import build_plan
from envbuild.spec.model import load_spec
from tests.helpers.locking import forge, run_lock

BASE = "mambaorg/micromamba:2.6.1@sha256:" + "b" * 64


def spec_text(channel: str, *, cuda: str | None = "12.9", conda: str = '["app"]') -> str:
    """A jax conda spec on H100 (driver 580), its CUDA chosen by `cuda` (None: the driver's newest)."""
    stack_cuda = f'cuda = "{cuda}"\n' if cuda else ""
    return (
        f'[stack]\ndriver = "580"\ngpus = ["H100"]\nframework = "jax"\npython = "3.12"\n'
        f'strategy = "conda"\n{stack_cuda}\n'
        f'[packages]\nconda = {conda}\nconda-channels = ["{channel}"]\n'
    )


def conda_framework(tmp_path: Path) -> tuple[str, ...]:
    """What the plan of the test spec asks conda for (jax=..., jaxlib=...=cuda12*): the matrix's."""
    (tmp_path / "probe.toml").write_text(spec_text("conda-forge"))
    spec = load_spec(str(tmp_path / "probe.toml"))
    return build_plan(load_matrix(), spec, spec.targets[0]).conda_framework


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rattler's repodata cache per test: a channel changed by one test is read afresh."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[CondaChannel]:
    built = stack_channel(tmp_path / "channel", conda_framework(tmp_path), python="3.12")
    built.index()
    with built:
        yield built


def project(tmp_path: Path, text: str) -> Path:
    directory = tmp_path / "project"
    directory.mkdir(exist_ok=True)
    (directory / "envbuild.toml").write_text(text)
    return directory


def conda_of(directory: Path) -> dict:
    locked, intact = load_lock(str(directory / "envbuild.lock"))
    assert intact
    (target,) = locked.targets
    return {p.name: p for p in target.conda}


def test_lock_solves_both_conda_layers_with_urls_and_sha256(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    code, _out, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0, err
    locked, _ = load_lock(str(directory / "envbuild.lock"))
    (target,) = locked.targets
    layers = [(p.layer, p.name) for p in target.conda]
    assert layers == sorted(layers, key=lambda x: (x[0] != "framework", x[1]))  # framework first, by name
    packages = {p.name: p for p in target.conda}
    framework = {n for n, p in packages.items() if p.layer == "framework"}
    assert framework == {"python", "pip", "cuda-version", "jax", "jaxlib"}
    assert {n for n, p in packages.items() if p.layer == "user"} == {"app", "lib"}
    assert packages["jaxlib"].build.startswith("cuda12") and packages["cuda-version"].version == "12.9"
    assert packages["lib"].version == "2.0" and packages["lib"].subdir == "noarch"
    for package in packages.values():
        filename = f"{package.name}-{package.version}-{package.build}.tar.bz2"
        assert package.url == f"{channel.url}/{package.subdir}/{filename}"
        assert package.channel == channel.url
        assert package.sha256 == channel.file_sha256(package.subdir, filename)
    assert f"conda layer (5 framework + 2 user packages from {channel.url})" in err
    text = (directory / "envbuild.lock").read_text()
    assert text.count("[[target.conda]]") == 7


def test_the_solver_picks_the_build_of_the_stacks_cuda_major(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url, cuda=None))  # driver 580: CUDA 13.0
    code, _, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0, err
    packages = conda_of(directory)
    assert packages["jaxlib"].build.startswith("cuda13") and packages["cuda-version"].version == "13.0"
    assert packages["jaxlib"].url.endswith(f"-{packages['jaxlib'].build}.tar.bz2")


def test_no_build_for_the_stacks_cuda_is_exit_3_and_no_lock(capsys, tmp_path: Path) -> None:
    only13 = stack_channel(tmp_path / "channel", conda_framework(tmp_path), python="3.12", cudas=("13.0",))
    only13.index()
    with only13:
        directory = project(tmp_path, spec_text(only13.url))  # CUDA 12.9: the channel has cuda13 only
        code, _out, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 3, err
    assert "no conda environment satisfies" in err and "__cuda=12.9" in err
    assert "cuda-version" in err and "fix:" in err and "Traceback" not in err
    assert not (directory / "envbuild.lock").exists()


def test_an_unsatisfiable_user_spec_is_exit_3_and_keeps_the_old_lock(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    before = (directory / "envbuild.lock").read_bytes()
    (directory / "envbuild.toml").write_text(spec_text(channel.url, conda='["app", "lib<2"]'))
    code, _, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 3, err
    assert "lib" in err and "no conda environment satisfies" in err
    assert (directory / "envbuild.lock").read_bytes() == before


def test_an_unreachable_channel_is_exit_1_naming_the_url(capsys, tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # held, not listening: a connect is refused
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/conda-forge"
        directory = project(tmp_path, spec_text(url))
        code, _, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 1, err
    assert url in err and "could not be read" in err and "Traceback" not in err
    assert not (directory / "envbuild.lock").exists()


def test_check_passes_then_catches_a_hand_edit_of_a_conda_entry(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 0, out + err
    lock = directory / "envbuild.lock"
    text = lock.read_text()
    # lib moved to 1.0 by hand, its URL too: a consistent edit only the seal catches
    edited = text.replace('version = "2.0"', 'version = "1.0"', 1).replace("lib-2.0-pyh0_0", "lib-1.0-pyh0_0")
    assert edited.count("lib-1.0-pyh0_0") == 1
    lock.write_text(edited)
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 1
    assert "seal" in out + err or "content-digest" in out + err
    # the version alone moved: it contradicts the URL's file name, which the reader refuses outright
    lock.write_text(text.replace('version = "2.0"', 'version = "1.0"', 1))
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 1 and "lib-2.0-pyh0_0.tar.bz2" in err and "contradict" in err, err


def test_check_names_a_conda_package_the_channel_changed(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    was = conda_of(directory)["lib"].sha256
    # the channel rebuilds lib 2.0 under the same name, version and build: other bytes, other sha256
    rebuilt = channel.root / "noarch" / "lib-2.0-pyh0_0.tar.bz2"
    rebuilt.unlink()
    channel.add("lib", "2.0", "pyh0_0", ["python"], subdir="noarch")
    channel.index()
    now = channel.file_sha256("noarch", "lib-2.0-pyh0_0.tar.bz2")
    assert now != was
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 1, out + err
    assert f"conda package lib: sha256 {was} -> {now}" in out + err
    # replaced by 2.1: the lock's version no longer solves, and the check says which package moved
    rebuilt.unlink()
    channel.add("lib", "2.1", "pyh0_0", subdir="noarch")
    channel.index()
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 1, out + err
    assert "conda package lib: version 2.0 -> 2.1" in out + err


def test_check_explains_a_conda_spec_and_channel_change(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    (directory / "envbuild.toml").write_text(spec_text(channel.url, conda='["app", "extra"]'))
    code, out, err = run_lock(capsys, directory, "--check", "--offline", "--base-image", BASE)
    assert code == 1
    assert "conda spec extra has no locked package" in out + err
    mirror = channel.url + "/mirror"
    (directory / "envbuild.toml").write_text(spec_text(mirror))
    code, out, err = run_lock(capsys, directory, "--check", "--offline", "--base-image", BASE)
    assert code == 1
    assert f"comes from {channel.url}, not from the spec's conda-channels ({mirror})" in out + err


def test_a_spec_change_is_not_skipped_by_the_no_op_relock(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url, conda="[]"))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    assert "lib" not in conda_of(directory)
    code, out, _ = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0 and "nothing resolved" in out
    (directory / "envbuild.toml").write_text(spec_text(channel.url))
    code, out, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0, err
    assert "nothing resolved" not in out and "+app 1.0" in out
    assert conda_of(directory)["lib"].layer == "user"


def test_relock_keeps_conda_pins_and_upgrade_frees_them(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    channel.add("lib", "3.0", "pyh0_0", subdir="noarch")
    channel.index()
    (directory / "envbuild.toml").write_text(spec_text(channel.url, conda='["app", "pip"]'))  # relocks
    code, out, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0, err
    assert "nothing resolved" not in out
    assert conda_of(directory)["lib"].version == "2.0"  # kept, though 3.0 is newer
    code, out, err = run_lock(capsys, directory, "--upgrade", "lib", "--base-image", BASE)
    assert code == 0, err
    assert conda_of(directory)["lib"].version == "3.0"
    assert "conda lib 2.0 -> 3.0" in out
    code, _, err = run_lock(capsys, directory, "--upgrade", "libb", "--base-image", BASE)
    assert code == 2 and "did you mean lib" in err


def test_relock_solves_afresh_when_the_old_pins_no_longer_fit(capsys, tmp_path: Path, channel) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    channel.add("lib", "3.0", "pyh0_0", subdir="noarch")
    channel.index()
    (directory / "envbuild.toml").write_text(spec_text(channel.url, conda='["app", "lib>=3"]'))
    code, _out, err = run_lock(capsys, directory, "--base-image", BASE)
    assert code == 0, err
    assert conda_of(directory)["lib"].version == "3.0"
    assert "the previous conda pins do not solve" in err


def test_conda_channels_without_a_conda_target_is_a_usage_error(capsys, tmp_path: Path) -> None:
    text = '[stack]\ndriver = "580"\nframework = "torch==2.7.1"\n\n[packages]\nconda-channels = ["nvidia"]\n'
    directory = project(tmp_path, text)
    code, _, err = run_lock(capsys, directory)
    assert code == 2
    assert "[packages] conda-channels" in err and 'no target uses strategy = "conda"' in err
    assert "fix:" in err


def test_check_catches_a_forged_conda_hash_with_the_digest_recomputed(
    capsys, tmp_path: Path, channel
) -> None:
    directory = project(tmp_path, spec_text(channel.url))
    assert run_lock(capsys, directory, "--base-image", BASE)[0] == 0
    locked, _ = load_lock(str(directory / "envbuild.lock"))
    (target,) = locked.targets
    forged_sha = "sha256:" + "f" * 64
    conda = tuple(p.replace(sha256=forged_sha) if p.name == "jaxlib" else p for p in target.conda)
    (directory / "envbuild.lock").write_text(forge(locked.replace(targets=(target.replace(conda=conda),))))
    code, out, err = run_lock(capsys, directory, "--check", "--base-image", BASE)
    assert code == 1
    real = conda_of_unsealed(directory, "jaxlib")
    assert f"conda package jaxlib: sha256 {forged_sha} -> " in out + err
    assert real == forged_sha  # the lock on disk is the forgery: the check named it, changed nothing


def conda_of_unsealed(directory: Path, name: str) -> str:
    locked, _ = load_lock(str(directory / "envbuild.lock"))
    return next(p.sha256 for p in locked.targets[0].conda if p.name == name)
