"""`envbuild audit IMAGE` on a real image: the Debian base with jax-cuda12-plugin 0.10.2's libraries
from PyPI copied in, audited through the Engine (docker save, nothing run) and from the local
registry by REPO@sha256 with no Engine at all; a K80 fails with the GPU's exact error, an RTX 5090
gets native SASS; a later layer's whiteouts hide what it deleted; `verify --gpu` gates before smoke;
and a second audit of the same layers is answered from what the first read, without an export.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envbuild.audit.targets import audit_path
from envbuild.cli.app import main
from tests.helpers.cudawheels import PLUGIN_DIR, download_jax_plugin, unpack_libraries
from tests.helpers.docker import docker, exports_while
from tests.helpers.registry import delete_manifest, manifest_digest, push

pytestmark = [pytest.mark.docker, pytest.mark.pypi]

SITE = "usr/local/lib/python3.11/site-packages"
NO_KERNEL = "no kernel image is available for execution on the device"
# cuobjdump --list-elf / --list-ptx on the wheel's kernels (issue 16): one more SASS than the matrix row
SASS = ["sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "sm_101", "sm_120"]
REPO = "envbuild-test/audit-jax"


@dataclass
class Images:
    wheel: Path
    plain: str  # the plugin's libraries in one layer
    deleted: str  # plain + a layer that deletes _prng.so and replaces _solver.so with a symlink
    registry: str
    plain_ref: str  # REPO@sha256:... in the registry
    deleted_ref: str


@pytest.fixture(scope="module")
def images(
    bookworm_image: str, anonymous_registry: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Images]:
    wheel = download_jax_plugin(tmp_path_factory.mktemp("jax-wheel"))
    context = tmp_path_factory.mktemp("audit-context")
    unpack_libraries(wheel, context)
    run = uuid.uuid4().hex[:12]
    plain, deleted = f"{anonymous_registry}/{REPO}:plain-{run}", f"{anonymous_registry}/{REPO}:deleted-{run}"
    (context / "Dockerfile").write_text(
        f"FROM {bookworm_image}\nCOPY {PLUGIN_DIR}/ /{SITE}/{PLUGIN_DIR}/\nLABEL io.envbuild.test.run={run}\n"
    )
    (context / "Dockerfile.deleted").write_text(
        f"FROM {plain}\nWORKDIR /{SITE}/{PLUGIN_DIR}\nRUN rm _prng.so && ln -sf _linalg.so _solver.so\n"
    )
    tags, digests = [plain, deleted], []
    try:
        docker("build", "-q", "-t", plain, str(context))
        docker("build", "-q", "-t", deleted, "-f", str(context / "Dockerfile.deleted"), str(context))
        for tag in tags:
            push(tag)
            digests.append(manifest_digest(anonymous_registry, REPO, tag.rsplit(":", 1)[1]))
        yield Images(
            wheel=wheel,
            plain=plain,
            deleted=deleted,
            registry=anonymous_registry,
            plain_ref=f"{anonymous_registry}/{REPO}@{digests[0]}",
            deleted_ref=f"{anonymous_registry}/{REPO}@{digests[1]}",
        )
    finally:
        for digest in digests:
            delete_manifest(anonymous_registry, REPO, digest)
        for tag in reversed(tags):
            docker("rmi", "-f", tag, check=False)


def audit_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["audit", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def kernels(document: dict) -> dict[str, tuple[list[str], list[str]]]:
    return {library["path"]: (library["sass"], library["ptx"]) for library in document["libraries"]}


def in_image(path: str) -> str:
    return f"{SITE}/{path}"


def test_k80_through_the_engine_exits_1_with_the_gpus_exact_error(
    images: Images, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", images.plain, "--gpu", "K80"]) == 1
    out = capsys.readouterr().out
    assert f"error: Tesla K80: {NO_KERNEL} ({in_image(PLUGIN_DIR + '/_linalg.so')})" in out
    assert f"{in_image(PLUGIN_DIR + '/_linalg.so')}\n  SASS: {', '.join(SASS)}\n  PTX:  compute_120\n" in out


def test_rtx_5090_through_the_engine_is_native_in_every_library_and_agrees_with_the_wheel(
    images: Images, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = audit_json(capsys, images.plain, "--gpu", "RTX 5090")
    assert code == 0 and document["ok"] and document["framework"] == "jax"
    wheel = audit_path(str(images.wheel), ())
    assert kernels(document) == {
        in_image(lib.path): (list(lib.kernels.sass), list(lib.kernels.ptx)) for lib in wheel.libraries
    }
    assert kernels(document)[in_image(PLUGIN_DIR + "/_linalg.so")] == (SASS, ["compute_120"])
    assert {library["verdicts"]["RTX 5090"] for library in document["libraries"]} == {"native"}


def test_by_digest_from_the_registry_with_no_engine_at_all(
    images: Images, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, through_engine = audit_json(capsys, images.plain, "--gpu", "RTX 5090")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # a pull could not happen
    code, document = audit_json(capsys, images.plain_ref, "--gpu", "RTX 5090")
    assert code == 0 and document["target"] == images.plain_ref
    assert kernels(document) == kernels(through_engine) and len(kernels(document)) == 3
    assert main(["audit", images.plain_ref, "--gpu", "K80"]) == 1
    assert (
        f"error: Tesla K80: {NO_KERNEL} ({in_image(PLUGIN_DIR + '/_solver.so')})" in capsys.readouterr().out
    )


@pytest.mark.parametrize("source", ["engine", "registry"])
def test_a_library_a_later_layer_deleted_or_replaced_is_not_audited(
    images: Images, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    ref = images.deleted if source == "engine" else images.deleted_ref
    code, document = audit_json(capsys, ref, "--gpu", "K80")
    assert code == 1
    assert list(kernels(document)) == [in_image(PLUGIN_DIR + "/_linalg.so")]  # _prng gone, _solver a link


def test_an_image_or_digest_that_does_not_exist_is_a_usage_error(
    images: Images, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "envbuild-test/no-such-image:never"]) == 2
    err = capsys.readouterr().err
    assert "image 'envbuild-test/no-such-image:never' is not in this Docker Engine" in err
    assert "fix: build or pull it first, or give REPO@sha256:<digest>" in err
    missing = f"{images.registry}/{REPO}@sha256:{'0' * 64}"
    assert main(["audit", missing]) == 2
    assert f"manifest sha256:{'0' * 64} not found in {images.registry}/{REPO}" in capsys.readouterr().err


def test_verify_with_a_gpu_that_has_no_kernel_image_fails_before_the_smoke_step(
    images: Images, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", images.plain, "--gpu", "K80", "--smoke-device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "audit: sm_37 (Tesla K80): no-kernel-image" in err
    assert f"the audit failed before the smoke step: Tesla K80: {NO_KERNEL} (" in err
    # the image has no Python: past the gate, the smoke step is what fails
    assert main(["verify", images.plain, "--gpu", "RTX 5090", "--smoke-device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "audit: sm_120 (RTX 5090): native" in err and NO_KERNEL not in err
    assert "smoke container" in err


def test_each_layer_is_read_once_and_judged_alike_from_what_was_read(
    images: Images, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """envbuild.image.auditcache, through `docker save` (ENVBUILD_AUDIT_READ=save: what an Engine whose
    storage this process cannot read gets): the Engine's event log shows the first audit of an image
    exporting it and the second not; both give the same kernels and verdicts. An image with one more
    layer (the deleting one) is exported again for that layer and still has its whiteouts applied, and
    an entry that is not what envbuild wrote is read afresh."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))  # nothing read before this test
    monkeypatch.setenv("ENVBUILD_AUDIT_READ", "save")
    image_id, deleted_id = (
        docker("image", "inspect", ref, "--format", "{{.Id}}").stdout.strip()
        for ref in (images.plain, images.deleted)
    )

    def audit(*args: str) -> tuple[tuple[int, dict], list[str]]:
        return exports_while(lambda: audit_json(capsys, *args), image_id, deleted_id)

    (first_code, first), exported = audit(images.plain, "--gpu", "K80")
    assert exported == [image_id]
    (second_code, second), exported = audit(images.plain, "--gpu", "K80")
    assert exported == []
    assert (second_code, second) == (first_code, first) and first_code == 1
    assert kernels(second)[in_image(PLUGIN_DIR + "/_linalg.so")] == (SASS, ["compute_120"])

    (_, deleted), exported = audit(images.deleted)
    assert exported == [deleted_id]
    assert in_image(PLUGIN_DIR + "/_prng.so") not in kernels(deleted)
    assert in_image(PLUGIN_DIR + "/_solver.so") not in kernels(deleted)  # a symlink now, judged once

    for entry in (tmp_path / "cache" / "audit").glob("*.json"):
        entry.write_text('{"format": 3, "layer": "sha256:0", "objects": "not a list"}')
    (again_code, again), exported = audit(images.plain, "--gpu", "K80")
    assert exported == [image_id] and (again_code, again) == (first_code, first)


def test_the_engines_own_storage_gives_the_layers_without_an_export(
    images: Images, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: as root beside the Engine, a layer not seen before is read from its overlay2 directory:
    nothing is exported, and the whiteouts (a deleted library, one replaced by a symlink) and every
    kernel come out as the `docker save` read gives them."""
    deleted_id = docker("image", "inspect", images.deleted, "--format", "{{.Id}}").stdout.strip()
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "saved"))
    monkeypatch.setenv("ENVBUILD_AUDIT_READ", "save")
    (saved_code, saved), exported = exports_while(lambda: audit_json(capsys, images.deleted), deleted_id)
    assert exported == [deleted_id]
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "storage"))
    monkeypatch.delenv("ENVBUILD_AUDIT_READ")
    (code, read), exported = exports_while(lambda: audit_json(capsys, images.deleted), deleted_id)
    assert exported == [] and (code, read) == (saved_code, saved)
    assert in_image(PLUGIN_DIR + "/_linalg.so") in kernels(read)
    assert in_image(PLUGIN_DIR + "/_prng.so") not in kernels(read)
