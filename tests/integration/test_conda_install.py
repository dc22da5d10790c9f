"""The locked conda layer is installable (issue 21): lock a conda target against a loopback channel,
render it, and install exactly the URLs of the rendered explicit files into a prefix on the host with
rattler's installer, each checked against the lock's sha256. No micromamba image can be pulled here,
so this stands in for the build's `micromamba install --file conda-*.txt`; a package file changed on
the channel after locking (its repodata rewritten to match, as a compromised mirror would) fails the
install on the hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.read import read_lock
from envbuild.matrix.model import Matrix
from tests.helpers.condainstall import channel_records, install_explicit, installed_packages, read_explicit
from tests.helpers.condalock import example_channel, example_plan, locked_project


def render(tmp_path: Path, matrix: Matrix, channel_url: str, capsys: pytest.CaptureFixture[str]) -> Path:
    """The locked example rendered: the context directory."""
    spec = locked_project(tmp_path / "project", matrix, channel_url)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return out / "default"


def test_the_rendered_explicit_files_install_exactly_the_lock(
    tmp_path: Path, matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    with example_channel(tmp_path / "channel", example_plan(matrix)) as channel:
        context = render(tmp_path, matrix, channel.url, capsys)
        files = [context / "conda-framework.txt", context / "conda-user.txt"]
        lines = [line for path in files for line in read_explicit(path)]
        # the lock's hashes are the channel's: the explicit lines name real files, as locked
        today = channel_records(lines, tmp_path / "check")
        assert [r.sha256.hex() for r in today] == [line.sha256 for line in lines]
        prefix = tmp_path / "prefix"
        install_explicit(files, prefix, tmp_path / "cache")
        served = {path for path, count in channel.requests.items() if path.endswith(".tar.bz2") and count}

    locked = read_lock(str(tmp_path / "project" / "envbuild.lock")).lock.targets[0].conda
    assert installed_packages(prefix) == {(p.name, p.version, p.build, p.url) for p in locked}
    assert {p.name for p in locked} == {"python", "libzstd", "pip", "cuda-version", "jaxlib", "jax", "optax"}
    assert ("jaxlib", "0.12.0.1", "cuda13_py312_0") in {(p.name, p.version, p.build) for p in locked}
    assert served == {"/" + p.url.split("/", 3)[3] for p in locked}  # each package file fetched, no other
    assert (
        prefix / "share" / "envbuild-test" / "jaxlib.txt"
    ).read_text() == "jaxlib 0.12.0.1 cuda13_py312_0\n"


def test_a_package_changed_after_locking_fails_the_install_on_its_hash(
    tmp_path: Path, matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    with example_channel(tmp_path / "channel", example_plan(matrix)) as channel:
        context = render(tmp_path, matrix, channel.url, capsys)
        files = [context / "conda-framework.txt", context / "conda-user.txt"]
        # the mirror swaps jaxlib's bytes and re-indexes, so its repodata agrees with the new file:
        # only the lock's hash still says what was locked
        jaxlib = next(channel.root.glob("linux-64/jaxlib-*cuda13*.tar.bz2"))
        locked = next(x for x in read_explicit(files[0]) if x.name == "jaxlib").sha256
        before = jaxlib.read_bytes()
        channel.add("jaxlib", "0.12.0.1", "cuda13_py312_0", ["python >=3.12,<3.13", "evil"])
        assert jaxlib.read_bytes() != before
        channel.index()
        with pytest.raises(Exception) as caught:  # rattler's errors live in its private modules
            install_explicit(files, tmp_path / "prefix", tmp_path / "cache")
    text = str(caught.value)
    assert "hash mismatch" in text and f"expected {locked}" in text and jaxlib.name in text, text
    assert not (tmp_path / "prefix" / "conda-meta" / "jaxlib-0.12.0.1-cuda13_py312_0.json").exists()
