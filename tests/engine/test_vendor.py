"""`envbuild vendor` against real loopback services: the PyPI-style index (small wheels and uv's own),
a conda channel, and the registry on 127.0.0.1:5000 holding a one-layer base image under a
test-unique name. Hashes are checked, a second run downloads nothing (the services' own request
counters say so), a corrupted or missing file is fetched again, and bundle_problems finds what a
damaged bundle lacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex, build_wheel
from envbuild.cli.app import main
from envbuild.lockfile.read import load_lock
from envbuild.vendor.check import bundle_problems
from tests.helpers.vendoring import (
    conda_channel_dir,
    push_image,
    python_index_dir,
    unique_repo,
    write_project,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def project(tmp_path: Path, anonymous_registry: str) -> Iterator[tuple[Path, PackageIndex, object, str]]:
    repo = unique_repo("vendor-base")
    digest = push_image(anonymous_registry, repo)
    base = f"{anonymous_registry}/{repo}:latest@{digest}"
    with (
        PackageIndex(python_index_dir(tmp_path / "pyindex")) as index,
        conda_channel_dir(tmp_path / "channel") as channel,
    ):
        spec = write_project(tmp_path / "project", index, channel, base, targets=2)
        yield spec, index, channel, base


def vendor(capsys, spec: Path, bundle: Path, *args: str) -> tuple[int, str, str]:
    code = main(["vendor", "-f", str(spec), "-o", str(bundle), *args])
    out, err = capsys.readouterr()
    return code, out, err


def file_requests(index: PackageIndex, channel) -> dict[str, int]:
    index.settle()
    served = {path: n for path, n in index.requests.items() if path.startswith("/files/")}
    served.update({path: n for path, n in channel.requests.items() if path.endswith(".tar.bz2")})
    return served


def test_vendor_fetches_checks_and_resumes(capsys, tmp_path: Path, project) -> None:
    spec, index, channel, base = project
    bundle = tmp_path / "bundle"
    code, out, err = vendor(capsys, spec, bundle)
    assert code == 0, err
    manifest = json.loads((bundle / "bundle.json").read_text())
    paths = [f["path"] for f in manifest["files"]]
    assert paths == sorted(set(paths))  # two targets, each shared file once
    kinds = {f["path"]: f["kind"] for f in manifest["files"]}
    assert kinds["wheels/app-1.0-py3-none-any.whl"] == kinds["wheels/lib-1.0-py3-none-any.whl"] == "wheel"
    (uv,) = [p for p, k in kinds.items() if k == "uv"]
    assert uv.startswith("wheels/uv-") and uv.endswith("_x86_64.whl")
    assert kinds["conda/linux-64/python-3.11.9-h0_0.tar.bz2"] == "conda"
    assert kinds["conda/noarch/tool-1.0-pyhd8ed1ab_0.tar.bz2"] == "conda"
    assert sum(k == "blob" for k in kinds.values()) == 3  # manifest, config, one layer
    for entry in manifest["files"]:
        data = (bundle / entry["path"]).read_bytes()
        import hashlib

        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["size"]
        assert "/files/" not in entry["source"] or entry["source"].startswith(index.root)
    assert [t["base-image"] for t in manifest["targets"]] == [base, base]
    layout = json.loads((bundle / "oci" / "index.json").read_text())
    assert [m["digest"] for m in layout["manifests"]] == [base.rsplit("@", 1)[1]]
    assert layout["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == base
    lock, _ = load_lock(str(spec.parent / "envbuild.lock"))
    assert bundle_problems(str(bundle), lock, None) == []
    first = file_requests(index, channel)
    assert first and set(first.values()) == {1}, first  # two targets, each file fetched once
    assert "0 already there" in out

    code, out, err = vendor(capsys, spec, bundle)
    assert code == 0, err
    assert file_requests(index, channel) == first  # nothing downloaded again
    assert f"({0} fetched" in out

    wheel = bundle / "wheels" / "lib-1.0-py3-none-any.whl"
    wheel.write_bytes(b"corrupted")
    (bundle / "conda" / "noarch" / "tool-1.0-pyhd8ed1ab_0.tar.bz2").unlink()
    problems = bundle_problems(str(bundle), lock, ["t0"])
    assert any("wheels/lib-1.0-py3-none-any.whl" in p and "corrupted" in p for p in problems), problems
    assert any("conda/noarch/tool-1.0-pyhd8ed1ab_0.tar.bz2" in p and "missing" in p for p in problems)
    code, out, err = vendor(capsys, spec, bundle)
    assert code == 0, err
    again = file_requests(index, channel)
    assert again["/files/lib-1.0-py3-none-any.whl"] == 2
    assert again["/noarch/tool-1.0-pyhd8ed1ab_0.tar.bz2"] == 2
    assert "(2 fetched" in out
    assert bundle_problems(str(bundle), lock) == []


def test_vendor_refuses_a_file_the_lock_does_not_pin(capsys, tmp_path: Path, project) -> None:
    spec, index, _channel, _base = project
    build_wheel(index.directory, "lib", "1.0", ["changed"])  # the index now serves other bytes
    code, _out, err = vendor(capsys, spec, tmp_path / "bundle")
    assert code == 1
    assert "lib==1.0" in err and index.url in err
    assert not (tmp_path / "bundle" / "bundle.json").exists()


def test_vendor_without_a_lock_says_lock_first(capsys, tmp_path: Path, project) -> None:
    spec, *_ = project
    (spec.parent / "envbuild.lock").unlink()
    code, _out, err = vendor(capsys, spec, tmp_path / "bundle")
    assert code == 2 and "envbuild lock" in err


def test_bundle_problems_name_a_missing_and_a_corrupted_blob(capsys, tmp_path: Path, project) -> None:
    spec, *_ = project
    bundle = tmp_path / "bundle"
    assert vendor(capsys, spec, bundle)[0] == 0
    manifest = json.loads((bundle / "bundle.json").read_text())
    blobs = [f["path"] for f in manifest["files"] if f["kind"] == "blob"]
    (bundle / blobs[0]).unlink()
    (bundle / blobs[1]).write_bytes(
        b"x" * manifest["files"][[f["path"] for f in manifest["files"]].index(blobs[1])]["size"]
    )
    lock, _ = load_lock(str(spec.parent / "envbuild.lock"))
    problems = bundle_problems(str(bundle), lock)
    assert any(blobs[0] in p and "missing" in p for p in problems), problems
    assert any(blobs[1] in p and "corrupted" in p for p in problems), problems
