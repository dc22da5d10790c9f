"""runtime.driver.identify of an image pushed by the Engine to the real registry: what a runtime
verifies is named by the registry's config digest (the id `promote --to --report` checks), and the
image's USER reaches Charliecloud's --uid/--gid as numbers. A one-file image: cheap."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import requests

from envbuild.image.platforms import host_platform
from envbuild.oci.registry import MANIFEST_ACCEPT, resolve_digest
from envbuild.runtime.driver import identify
from tests.helpers.docker import docker
from tests.helpers.registry import delete_manifest

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/runtime-identify"


@pytest.mark.parametrize(
    ("user", "expected"), [("10001:10002", "10001:10002"), ("10001", "10001:10001"), ("app", None)]
)
def test_identify_reads_the_pushed_image_id_and_user(
    user: str, expected: str | None, anonymous_registry: str, tmp_path: Path
) -> None:
    (tmp_path / "marker").write_text(user)
    (tmp_path / "Dockerfile").write_text(f"FROM scratch\nCOPY marker /marker\nUSER {user}\n")
    tag = f"{anonymous_registry}/{REPOSITORY}:{uuid.uuid4().hex[:8]}"
    docker("build", "-q", "-t", tag, str(tmp_path))
    try:
        docker("push", "--quiet", tag)
        digest = resolve_digest(tag)
        manifest = requests.get(
            f"http://{anonymous_registry}/v2/{REPOSITORY}/manifests/{digest}",
            headers={"Accept": MANIFEST_ACCEPT},
            timeout=30,
        ).json()
        config = requests.get(
            f"http://{anonymous_registry}/v2/{REPOSITORY}/blobs/{manifest['config']['digest']}", timeout=30
        ).json()
        found = identify(f"{anonymous_registry}/{REPOSITORY}@{digest}")
        delete_manifest(anonymous_registry, REPOSITORY, digest)
    finally:
        docker("rmi", tag, check=False)
    assert (found.image_id, found.platform, found.user, found.local) == (
        manifest["config"]["digest"],
        host_platform().name,
        expected,
        False,
    )
    assert found.env == tuple(config["config"].get("Env") or ())  # BuildKit records a PATH
