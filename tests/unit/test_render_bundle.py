"""`render/build --bundle` (issue 38): bundle.json read strictly, the coverage check naming each missing
or altered file, and the docker-archive stream `docker load` takes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.lockfile.model import Lock, LockedPackage, LockedTarget, body_text
from envbuild.lockfile.seal import content_digest
from envbuild.render.bundle import read_bundle, require_covers
from envbuild.render.bundleoci import (
    archive_manifest,
    bundle_from,
    docker_archive,
    local_name,
    read_manifest,
)
from envbuild.vendor.check import bundle_problems

WHEEL = "six-1.16.0-py2.py3-none-any.whl"


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"hello"))
    return gzip.compress(raw.getvalue(), mtime=0)


def make_bundle(root: Path, *, wheel: bytes = b"the six wheel") -> tuple[Path, Lock]:
    """A bundle of one wheel and a one-layer base, and the lock it covers."""
    bundle = root / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    blobs = bundle / "oci" / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (bundle / "wheels" / WHEEL).write_bytes(wheel)
    layer = _layer()
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]}}).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "digest": "sha256:" + _hex(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "digest": "sha256:" + _hex(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    for data in (layer, config, manifest):
        (blobs / _hex(data)).write_bytes(data)
    base = f"127.0.0.1:5999/envbuild-test/base:latest@sha256:{_hex(manifest)}"
    (bundle / "oci" / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (bundle / "oci" / "index.json").write_text(
        json.dumps(
            {"schemaVersion": 2, "manifests": [{"digest": "sha256:" + _hex(manifest), "size": len(manifest)}]}
        )
    )
    package = LockedPackage(
        name="six",
        version="1.16.0",
        layer="user",
        index="http://127.0.0.1:1/simple",
        hashes=("sha256:" + _hex(wheel),),
    )
    target = LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="wheels",
        python="3.11",
        base_image=base,
        requirements=("six==1.16.0",),
        stack=(),
        packages=(package,),
        conda=(),
    )
    lock = Lock(envbuild="0", spec_digest="s", matrix_digest="m", targets=(target,))
    files = [
        {"path": f"wheels/{WHEEL}", "kind": "wheel", "sha256": _hex(wheel), "size": len(wheel), "source": "x"}
    ]
    files += [
        {
            "path": f"oci/blobs/sha256/{_hex(d)}",
            "kind": "blob",
            "sha256": _hex(d),
            "size": len(d),
            "source": base,
        }
        for d in (layer, config, manifest)
    ]
    document = {
        "bundle-version": 1,
        "envbuild": "0",
        "lock-digest": content_digest(body_text(lock)),
        "targets": [{"name": "default", "platform": "linux/amd64", "base-image": base}],
        "files": sorted(files, key=lambda f: f["path"]),
    }
    (bundle / "bundle.json").write_text(json.dumps(document, indent=2))
    return bundle, lock


def _edit(bundle: Path, change) -> None:
    document = json.loads((bundle / "bundle.json").read_text())
    change(document)
    (bundle / "bundle.json").write_text(json.dumps(document))


def _refused(bundle: Path) -> str:
    with pytest.raises(UsageError) as caught:
        read_bundle(str(bundle))
    return caught.value.message


def test_a_good_bundle_is_read_and_covers_its_lock(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    read = read_bundle(str(bundle))
    assert read.wheelhouse == str(bundle / "wheels")
    assert [f.kind for f in read.files].count("blob") == 3
    assert bundle_problems(str(bundle), lock, None, installer="pip") == []
    covered = require_covers(str(bundle), lock, ["default"], installer="pip")
    assert covered.lock_digest == content_digest(body_text(lock))


@pytest.mark.parametrize(
    ("path", "kind", "said"),
    [
        ("../outside.whl", "wheel", "inside the bundle"),
        ("/etc/passwd", "wheel", "relative path"),
        ("wheels/../../x.whl", "wheel", "inside the bundle"),
        ("conda/linux-64/../../../x", "conda", "inside the bundle"),
        ("oci/blobs/sha256/" + "a" * 64, "wheel", "wheels/<name>.whl"),
        ("wheels/x.whl", "blob", "oci/blobs/sha256/<64 hex>"),
        ("conda/win-64/x.conda", "conda", "conda/<linux-64"),
    ],
)
def test_a_path_that_escapes_or_is_not_where_its_kind_lives_is_refused(
    tmp_path: Path, path: str, kind: str, said: str
) -> None:
    bundle, _ = make_bundle(tmp_path)
    _edit(bundle, lambda d: d["files"][0].update(path=path, kind=kind))
    message = _refused(bundle)
    assert "files[0].path" in message and said in message and "bundle.json" in message


def test_an_unknown_kind_a_bad_hex_an_unknown_key_and_another_version_are_refused(tmp_path: Path) -> None:
    bundle, _ = make_bundle(tmp_path)
    _edit(bundle, lambda d: d["files"][0].update(kind="tarball"))
    assert "files[0].kind 'tarball' is not one of wheel, uv, conda, blob" in _refused(bundle)
    bundle, _ = make_bundle(tmp_path / "2")
    _edit(bundle, lambda d: next(f for f in d["files"] if f["kind"] == "wheel").update(sha256="ABC"))
    assert ".sha256 of wheels/six-1.16.0-py2.py3-none-any.whl is not 64 lowercase hex" in _refused(bundle)
    bundle, _ = make_bundle(tmp_path / "3")
    _edit(bundle, lambda d: d.update(extra=1))
    assert "unknown key(s) extra" in _refused(bundle)
    bundle, _ = make_bundle(tmp_path / "4")
    _edit(bundle, lambda d: d.update({"bundle-version": 2}))
    assert "bundle-version" in _refused(bundle)
    bundle, _ = make_bundle(tmp_path / "5")
    _edit(bundle, lambda d: d.update({"lock-digest": "md5:x"}))
    assert "lock-digest is not sha256:<64 hex>" in _refused(bundle)


def test_an_oversized_or_missing_manifest_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuild.vendor import manifest

    bundle, _ = make_bundle(tmp_path)
    monkeypatch.setattr(manifest, "MAX_MANIFEST_BYTES", 100)
    assert "is not a bundle manifest" in _refused(bundle) and "100" in _refused(bundle)
    (bundle / "bundle.json").unlink()
    assert "is missing: the bundle is unfinished" in _refused(bundle)


def test_a_missing_and_a_corrupted_file_are_each_named(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    (bundle / "wheels" / WHEEL).write_bytes(b"the six wheel, altered")  # same name, other bytes
    layer = next(
        p for p in (bundle / "oci" / "blobs" / "sha256").iterdir() if p.read_bytes()[:2] == b"\x1f\x8b"
    )
    layer.unlink()
    problems = bundle_problems(str(bundle), lock, None, installer="pip")
    assert any(p.startswith(f"wheels/{WHEEL}: ") and "(corrupted)" in p for p in problems), problems
    assert f"oci/blobs/sha256/{layer.name}: listed in bundle.json, missing from the bundle" in problems
    with pytest.raises(UsageError) as caught:
        require_covers(str(bundle), lock, None, installer="pip")
    assert f"wheels/{WHEEL}" in caught.value.message and layer.name in caught.value.message


def test_a_wheel_the_lock_does_not_pin_and_another_lock_are_named(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    other = "sha256:" + "c" * 64
    package = lock.targets[0].packages[0].replace(hashes=(other,))
    relocked = lock.replace(targets=(lock.targets[0].replace(packages=(package,)),))
    problems = bundle_problems(str(bundle), relocked, None, installer="pip")
    assert (
        "target default (linux/amd64): wheels/ has no six==1.16.0 wheel for Python 3.11 whose sha256 the "
        "lock pins" in problems
    )
    assert any("lock-digest" in p and "another lock" in p for p in problems)


def test_a_symlink_in_the_bundle_is_not_followed(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    wheel = bundle / "wheels" / WHEEL
    outside = tmp_path / "outside.whl"
    outside.write_bytes(wheel.read_bytes())
    wheel.unlink()
    wheel.symlink_to(outside)
    assert any(
        p.startswith(f"wheels/{WHEEL}: ") and "symbolic link" in p
        for p in bundle_problems(str(bundle), lock, None, installer="pip")
    )


def test_the_docker_archive_names_the_config_and_layers_by_their_blob_paths(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    digest = lock.targets[0].base_image.rsplit("@", 1)[1]
    manifest = read_manifest(str(bundle), digest)
    tag = local_name(lock.targets[0].base_image)
    assert tag == f"envbuild-bundle/envbuild-test/base:{digest[7:19]}"
    (entry,) = json.loads(archive_manifest(manifest, tag))
    assert entry == {"Config": manifest.config_path, "RepoTags": [tag], "Layers": list(manifest.layer_paths)}
    data = b"".join(docker_archive(str(bundle), manifest, tag))
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        assert archive.getnames() == ["manifest.json", manifest.config_path, *manifest.layer_paths]
        for path in (manifest.config_path, *manifest.layer_paths):  # the blobs as they are, gzip included
            assert archive.extractfile(path).read() == (bundle / path).read_bytes()
        assert json.loads(archive.extractfile("manifest.json").read()) == [entry]


def test_a_blob_altered_after_the_check_ends_the_archive_stream(tmp_path: Path) -> None:
    bundle, lock = make_bundle(tmp_path)
    manifest = read_manifest(str(bundle), lock.targets[0].base_image.rsplit("@", 1)[1])
    layer = bundle / manifest.layer_paths[0]
    data = layer.read_bytes()
    layer.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(UsageError) as caught:
        b"".join(docker_archive(str(bundle), manifest, "x:y"))
    assert manifest.layer_paths[0] in caught.value.message and "altered" in caught.value.message


def test_the_bundle_plan_names_the_local_tag_in_from_only() -> None:
    class Plan:  # the two fields bundle_from reads and replaces
        def __init__(self, base_image, runtime_image):
            self.base_image, self.runtime_image = base_image, runtime_image

        def replace(self, **changes):
            return Plan(
                changes.get("base_image", self.base_image), changes.get("runtime_image", self.runtime_image)
            )

    base = "r.example/a/b:1@sha256:" + "d" * 64
    assert bundle_from(Plan(base, None), "l:1").base_image == "l:1"
    assert bundle_from(Plan(base, base), "l:1").runtime_image == "l:1"
    assert bundle_from(Plan(base, "other:2"), "l:1").runtime_image == "other:2"


def test_bundle_with_wheelhouse_is_a_usage_error_naming_the_one_to_drop(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "envbuild.toml"
    stack = 'driver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n'
    spec.write_text(f"[stack]\n{stack}")
    for command in ("render", "build"):
        code = main([command, "-f", str(spec), "--bundle", str(tmp_path), "--wheelhouse", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "--bundle and --wheelhouse both give the wheels" in err and "drop --wheelhouse" in err
