"""`envbuild build --bundle` air-gapped end to end (issue 38): the torch CPU spec locked against a registry
of this test's own and a loopback index, bundled, and then built with the registry stopped, the index
gone and every proxy variable pointing at a closed port. The base comes from the bundle (loaded into
the Engine, FROM its bundle-local tag), the wheels from its wheels/. The image is built, verified (CPU
smoke step) and tagged, and its content is that of the same lock built from the network.

Order: the air-gapped build comes first, so it does its installs itself (BuildKit has no layer of this
lock cached); the network build then runs with the registry started again on the same port and
storage, and finds the air-gapped build's layers in the cache only if their inputs are the same bytes.
The shared 127.0.0.1:5000 registry is never stopped: this registry is the test's own.

The bundle is made by `envbuild vendor` from the lock alone, while the registry and the index answer.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.cli.app import main
from envbuild.render.bundleoci import local_name
from tests.helpers.docker import TORCH_SPEC, docker
from tests.helpers.locking import no_network
from tests.helpers.registry import answers, push, start_registry, stop

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/airgap"
# what the test reads from each image: every file of the venv's site-packages as (path, size, sha256),
# and the installed distributions; but bytecode (its header holds the source's mtime) and uv's
# uv_cache.json (when uv installed it: its RECORD line is left out of RECORD too)
CONTENT = r"""
import hashlib, json, os, sys, sysconfig
root = sysconfig.get_paths()["purelib"]
files = []
for here, _, names in os.walk(root):
    for name in names:
        path = os.path.join(here, name)
        if name.endswith(".pyc") or name == "uv_cache.json" or os.path.islink(path):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if name == "RECORD":  # without the line of uv_cache.json, uv's note of when it installed
            data = b"".join(x for x in data.splitlines(True) if b".dist-info/uv_cache.json," not in x)
        files.append((os.path.relpath(path, root), len(data), hashlib.sha256(data).hexdigest()))
files.sort()
dists = sorted(n for n in os.listdir(root) if n.endswith(".dist-info"))
print(json.dumps({"files": files, "dists": dists}))
"""


def _spec(index_url: str) -> str:
    packages = f'index-url = "{index_url}"\nframework-index-url = "{index_url}"\n'
    text = TORCH_SPEC.replace("[packages]\n", "[packages]\n" + packages)
    return text + f'\n[image]\nrepository = "{REPOSITORY}"\ntags = ["bundle-e2e"]\n'


def _record(out: Path) -> dict:
    return json.loads((out / "default" / "record.json").read_text())


def _content(image: str) -> dict:
    ran = docker(
        "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", CONTENT, check=False
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout)


def _inspect(image: str) -> dict:
    return json.loads(docker("image", "inspect", image).stdout)[0]


def test_build_from_a_bundle_with_no_registry_and_no_index(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, bookworm_image: str, wheelhouse: Path
) -> None:
    def say(line: str) -> None:  # the figures, past capsys (run with -s to see them)
        with capsys.disabled():
            print(line)

    registry_dir = tmp_path / "registry"
    host, registry = start_registry(registry_dir)
    base = f"{host}/envbuild-test/bundle-base:latest"
    tag = f"{REPOSITORY}:bundle-e2e"
    local = None
    try:
        docker("tag", bookworm_image, base)
        push(base)
        spec = tmp_path / "envbuild.toml"
        with PackageIndex(wheelhouse) as index:
            spec.write_text(_spec(index.url))
            assert main(["lock", "-f", str(spec), "--base-image", base]) == 0, capsys.readouterr().err
            bundle = tmp_path / "bundle"
            capsys.readouterr()
            started = time.perf_counter()
            assert main(["vendor", "-f", str(spec), "-o", str(bundle)]) == 0, capsys.readouterr().err
            say(f"\nvendor: {time.perf_counter() - started:.1f}s; {capsys.readouterr().out.strip()}")
            document = json.loads((bundle / "bundle.json").read_text())
        lock_text = (tmp_path / "envbuild.lock").read_text()
        pinned = next(line for line in lock_text.splitlines() if line.startswith("base-image = "))
        canonical = json.loads(pinned.split(" = ", 1)[1])
        local = local_name(canonical)
        stop(registry)  # the registry and the index are gone; the pushed tag (and its RepoDigest) too
        docker("rmi", base)
        docker("rmi", "-f", local, check=False)
        files = document["files"]
        say(
            f"\nbundle: {len(files)} files, {sum(f['size'] for f in files) / 2**20:.1f} MiB "
            f"({sum(f['kind'] == 'blob' for f in files)} blobs)"
        )
        args = ["build", "-f", str(spec), "--base-image", base, "--bundle", str(bundle)]
        with no_network(monkeypatch, tmp_path / "uv-cache"):
            # a bundle whose file differs from what it lists fails before anything is built, naming it
            six = next(bundle / f["path"] for f in files if f["path"].startswith("wheels/six-"))
            good = six.read_bytes()
            six.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
            capsys.readouterr()
            assert main([*args, "-o", str(tmp_path / "refused")]) == 2
            err = capsys.readouterr().err
            assert f"wheels/{six.name}" in err and "(corrupted)" in err
            assert not (tmp_path / "refused" / "default" / "record.json").exists()
            six.write_bytes(good)

            started = time.perf_counter()
            code = main([*args, "-o", str(tmp_path / "gap")])
            seconds = time.perf_counter() - started
            assert code == 0, capsys.readouterr().err[-3000:]
        say(f"air-gapped build --bundle (render, load, build, audit, verify, promote): {seconds:.1f}s")
        gap = _record(tmp_path / "gap")
        assert gap["status"] == "promoted" and gap["smoke"]["passed"] is True
        dockerfile = (tmp_path / "gap" / "default" / "Dockerfile").read_text()
        assert f"FROM {local}\n" in dockerfile
        loaded = _inspect(local)
        # it came from the bundle: the Engine holds no digest of the stopped registry's (the image's
        # config is bookworm's, which other tests push elsewhere, so RepoDigests may name those)
        assert loaded["Id"] == _inspect(bookworm_image)["Id"]
        assert not [d for d in loaded["RepoDigests"] if d.startswith(f"{host}/")]
        gap_image = _inspect(tag)
        assert gap_image["Config"]["Labels"]["org.opencontainers.image.base.name"] == canonical
        assert gap["stack"]["base_image"] == canonical
        gap_content = _content(tag)
        docker("rmi", tag)

        # the same lock from the network: the registry started again on its port and storage
        restarted = subprocess.Popen(
            ["docker-registry", "serve", str(registry_dir / "config.yml")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        registry = restarted
        for _ in range(100):
            if answers(host):
                break
            time.sleep(0.2)
        started = time.perf_counter()
        net_args = ["build", "-f", str(spec), "--base-image", base, "--wheelhouse", str(wheelhouse)]
        assert main([*net_args, "-o", str(tmp_path / "net")]) == 0, capsys.readouterr().err[-3000:]
        say(f"network build (the same lock, after the air-gapped one): {time.perf_counter() - started:.1f}s")
        assert f"FROM {canonical}\n" in (tmp_path / "net" / "default" / "Dockerfile").read_text()
        net_image = _inspect(tag)
        base_layers = _inspect(bookworm_image)["RootFS"]["Layers"]
        gap_layers, net_layers = gap_image["RootFS"]["Layers"], net_image["RootFS"]["Layers"]
        assert gap_layers[: len(base_layers)] == net_layers[: len(base_layers)] == base_layers
        net_content = _content(tag)
        gap_files = {tuple(f) for f in gap_content["files"]}
        net_files = {tuple(f) for f in net_content["files"]}
        differ = sorted(gap_files ^ net_files)[:20]
        assert gap_files == net_files, differ  # every installed file, byte for byte
        assert net_content["dists"] == gap_content["dists"]
        assert len(gap_files) > 1000 and any(d.startswith("torch-2.13.0") for d in gap_content["dists"])
        say(f"layers identical: {gap_layers == net_layers} ({len(gap_layers)} layers)")
    finally:
        stop(registry)
        docker("rmi", "-f", tag, base, *([local] if local else []), check=False)
