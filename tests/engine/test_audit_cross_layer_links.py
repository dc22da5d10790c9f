"""`envbuild audit IMAGE` of a local image whose library names are links to files another layer added
(issue 33, item 6): the loader loads the target's bytes under the link's name, so the audit judges
them there, from the Engine's overlay2 storage, from `docker save`, and from the per-layer cache.

The image, on the debootstrap test base: layer 1 holds the real jax-cuda12-plugin 0.10.2
`_linalg.so` (SASS sm_50 to sm_120, nothing a Tesla K80, sm_37, can run) as /opt/blobs/kernels.bin,
layer 2 a directory link /opt/kernels -> blobs, and layer 3 the plugin's `_linalg.so` as an absolute
link to that file and `_solver.so` as a relative one through the directory link. Before, the Engine
paths judged neither (their targets lie in other layers) and a K80 passed.
"""

from __future__ import annotations

import json
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.cudawheels import PLUGIN_DIR, download_jax_plugin
from tests.helpers.docker import docker, exports_while

pytestmark = [pytest.mark.docker, pytest.mark.pypi]

SITE = "usr/local/lib/python3.11/site-packages"
NO_KERNEL = "no kernel image is available for execution on the device"
LINKS = [f"{SITE}/{PLUGIN_DIR}/_linalg.so", f"{SITE}/{PLUGIN_DIR}/_solver.so"]


@pytest.fixture(scope="module")
def image(bookworm_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wheel = download_jax_plugin(tmp_path_factory.mktemp("jax-wheel"))
    context = tmp_path_factory.mktemp("links-context")
    with zipfile.ZipFile(wheel) as archive:
        (context / "kernels.bin").write_bytes(archive.read(f"{PLUGIN_DIR}/_linalg.so"))
    plugin = f"/{SITE}/{PLUGIN_DIR}"
    up = "/".join([".."] * plugin.strip("/").count("/") + [".."])  # from the plugin's directory to /
    (context / "Dockerfile").write_text(
        f"FROM {bookworm_image}\n"
        "COPY kernels.bin /opt/blobs/kernels.bin\n"
        "RUN ln -s blobs /opt/kernels\n"
        f"RUN mkdir -p {plugin} && ln -s /opt/blobs/kernels.bin {plugin}/_linalg.so"
        f" && ln -s {up}/opt/kernels/kernels.bin {plugin}/_solver.so\n"
        f"LABEL io.envbuild.test.run={uuid.uuid4().hex[:12]}\n"
    )
    tag = f"envbuild-test/audit-links:{uuid.uuid4().hex[:12]}"
    try:
        docker("build", "-q", "-t", tag, str(context))
        yield tag
    finally:
        docker("rmi", "-f", tag, check=False)


def audit(capsys: pytest.CaptureFixture[str], image: str, gpu: str) -> tuple[int, dict]:
    code = main(["audit", image, "--gpu", gpu, "--json"])
    return code, json.loads(capsys.readouterr().out)


def judged(document: dict) -> dict[str, tuple[list[str], list[str], str]]:
    return {
        library["path"]: (library["sass"], library["ptx"], *library["verdicts"].values())
        for library in document["libraries"]
    }


def assert_judged_by_the_target(document: dict, verdict: str) -> None:
    libraries = judged(document)
    assert sorted(libraries) == LINKS, libraries
    for path in LINKS:
        sass, ptx, got = libraries[path]
        assert "sm_120" in sass and "sm_37" not in sass and ptx == ["compute_120"]
        assert got == verdict


@pytest.mark.parametrize("read", ["storage", "save"])
def test_a_link_to_another_layers_file_is_judged_by_it_read_and_cached(
    image: str,
    read: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A K80 fails on both links with the GPU's exact error, an RTX 5090 passes on the same kernels,
    on the first audit (layers read) and on a cache hit (the target re-read: from the storage, or by a
    second export when the storage cannot be read here)."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    if read == "save":
        monkeypatch.setenv("ENVBUILD_AUDIT_READ", "save")
    image_id = docker("image", "inspect", image, "--format", "{{.Id}}").stdout.strip()
    (code, first), exported = exports_while(lambda: audit(capsys, image, "K80"), image_id)
    assert code == 1 and not first["ok"]
    assert exported == ([image_id] if read == "save" else [])
    assert_judged_by_the_target(first, "no-kernel-image")

    (code, cached), exported = exports_while(lambda: audit(capsys, image, "RTX 5090"), image_id)
    assert code == 0 and cached["ok"]
    assert exported == ([image_id] if read == "save" else [])  # every layer cached: only the target
    assert_judged_by_the_target(cached, "native")

    assert main(["audit", image, "--gpu", "K80"]) == 1
    out = capsys.readouterr().out
    for path in LINKS:
        assert f"error: Tesla K80: {NO_KERNEL} ({path})" in out
