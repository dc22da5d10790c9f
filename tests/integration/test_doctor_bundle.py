"""`envbuild doctor --bundle` on real bundles: `envbuild vendor` fills each one from loopback services (a
Python index with small wheels and uv's own, a conda channel, and a one-layer base image pushed over
the registry API under a test-unique name; no image is built), then the index and the channel are shut
down before doctor runs, so its checks are offline. A good bundle passes; a missing file, a corrupted
one and a bundle made for another lock each fail with the file or the digests named and a fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.host.bundlecheck import bundle_checks, bundle_subject
from tests.helpers.vendoring import (
    conda_channel_dir,
    push_image,
    python_index_dir,
    unique_repo,
    write_project,
)


@pytest.fixture
def vendored(tmp_path: Path, anonymous_registry: str, capsys) -> Iterator[tuple[Path, Path]]:
    """(the spec, its bundle), every service but the shared registry stopped."""
    repo = unique_repo("doctor-bundle")
    base = f"{anonymous_registry}/{repo}:latest@{push_image(anonymous_registry, repo)}"
    bundle = tmp_path / "bundle"
    with (
        PackageIndex(python_index_dir(tmp_path / "pyindex")) as index,
        conda_channel_dir(tmp_path / "channel") as channel,
    ):
        spec = write_project(tmp_path / "project", index, channel, base, targets=2)
        code = main(["vendor", "-f", str(spec), "-o", str(bundle), "-q"])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    yield spec, bundle


def doctor(capsys, spec: Path, bundle: Path, *extra: str) -> tuple[int, dict[str, dict]]:
    code = main(["doctor", "--no-gpu", "--bundle", str(bundle), "-f", str(spec), "--json", *extra])
    out, err = capsys.readouterr()
    assert out, err
    report = json.loads(out)
    assert report["ok"] is (code == 0), err  # exit 1 exactly when some check failed
    return code, {c["name"]: c for c in report["checks"] if c["name"].startswith("bundle")}


def test_a_good_bundle_passes_offline(capsys, vendored) -> None:
    spec, bundle = vendored
    _code, checks = doctor(capsys, spec, bundle)  # the Engine's checks decide the exit code
    manifest = checks["bundle"]
    assert manifest["status"] == "ok", manifest
    assert "made for " + str(spec.parent / "envbuild.lock") in manifest["evidence"]
    coverage = checks["bundle coverage"]
    assert coverage["status"] == "ok", coverage
    assert "t0 (linux/amd64), t1 (linux/amd64)" in coverage["evidence"]
    platform = checks["bundle base linux/amd64"]
    assert platform["status"] in ("ok", "warn") and "envbuild-test/doctor-bundle-" in platform["evidence"]
    assert len(checks) == 3


def test_a_missing_file_fails_naming_it(capsys, vendored) -> None:
    spec, bundle = vendored
    (bundle / "conda" / "noarch" / "tool-1.0-pyhd8ed1ab_0.tar.bz2").unlink()
    code, checks = doctor(capsys, spec, bundle)
    assert code == 1
    coverage = checks["bundle coverage"]
    assert coverage["status"] == "fail"
    missing = "conda/noarch/tool-1.0-pyhd8ed1ab_0.tar.bz2: listed in bundle.json, missing"
    assert missing in coverage["evidence"]
    assert f"envbuild vendor -f {spec} -o {bundle}" in coverage["fix"]
    assert checks["bundle"]["status"] == "ok"  # the manifest itself is fine


def test_a_corrupted_file_fails_naming_it(capsys, vendored) -> None:
    spec, bundle = vendored
    wheel = bundle / "wheels" / "lib-1.0-py3-none-any.whl"
    wheel.write_bytes(bytes(len(wheel.read_bytes())))  # same size, other bytes: only the hash tells
    code, checks = doctor(capsys, spec, bundle)
    assert code == 1
    coverage = checks["bundle coverage"]
    assert coverage["status"] == "fail"
    assert "wheels/lib-1.0-py3-none-any.whl: sha256" in coverage["evidence"]
    assert "(corrupted)" in coverage["evidence"]
    assert "lib==1.0" in coverage["evidence"]  # and the package it leaves uncovered


def test_a_bundle_made_for_another_lock_fails(capsys, tmp_path: Path, vendored) -> None:
    spec, bundle = vendored
    lock = spec.parent / "envbuild.lock"
    other = tmp_path / "other" / "envbuild.lock"
    other.parent.mkdir()
    other.write_text(lock.read_text())
    before = json.loads((bundle / "bundle.json").read_text())["lock-digest"]
    spec_text = spec.read_text()
    with (
        PackageIndex(python_index_dir(tmp_path / "pyindex2")) as index,
        conda_channel_dir(tmp_path / "channel2") as channel,
    ):
        base = json.loads((bundle / "bundle.json").read_text())["targets"][0]["base-image"]
        write_project(spec.parent, index, channel, base, targets=1)  # relocked: one target fewer
    assert spec.read_text() != spec_text  # another index URL: another spec digest, another lock
    code, checks = doctor(capsys, spec, bundle)
    assert code == 1
    manifest = checks["bundle"]
    assert manifest["status"] == "fail"
    assert "made for another lock" in manifest["evidence"] and before in manifest["evidence"]
    assert "envbuild vendor again" in manifest["fix"]
    # the lock it was made for, named as --lock names it, still passes
    subject = bundle_subject(str(bundle), lock=str(other), spec=str(spec))
    assert subject.lock_path == str(other)
    assert [c.status for c in bundle_checks(subject, machine="x86_64")] == ["ok", "ok", "ok"]


def test_a_bundle_of_one_target_warns_about_the_others(capsys, tmp_path: Path, vendored) -> None:
    spec, bundle = vendored
    manifest = json.loads((bundle / "bundle.json").read_text())
    manifest["targets"] = manifest["targets"][:1]  # as `vendor --target t0` writes it
    (bundle / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
    checks = {c.name: c for c in bundle_checks(bundle_subject(str(bundle), lock=None, spec=str(spec)))}
    coverage = checks["bundle coverage"]
    assert coverage.status == "warn"
    assert "covers t0 (linux/amd64)" in coverage.evidence and "not vendored" in coverage.evidence
    assert "t1 (linux/amd64)" in coverage.evidence
