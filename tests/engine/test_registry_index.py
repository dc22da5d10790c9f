"""A multi-platform promotion on the real registry (issue 19, "Promote"): one image per platform,
built without emulation (FROM scratch + COPY + LABEL, no RUN) for linux/amd64 and linux/arm64 and
pushed by digest; `envbuild promote A@sha256:.. B@sha256:.. --to TAG --report .. --report ..` pushes
an OCI index over them and tags it. The index is read back from the registry as a puller reads it."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from envbuild.errors import EnvbuildError, PromoteError
from envbuild.image.promote import PlatformImage, promote_platforms
from envbuild.image.trust import TrustedReport, trusted_report
from envbuild.oci.registry import image_platform, index_body, resolve_digest
from tests.helpers.docker import docker
from tests.helpers.registry import delete_manifest, manifest_digest, push
from tests.helpers.reports import captured, write_report

pytestmark = pytest.mark.docker

REPO = "envbuild-test/multiplatform"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
PASSED = captured("torch-cpu-passed.json")
FAILED = captured("torch-cpu-lr0-failed.json")


@dataclass
class Platforms:
    registry: str
    run: str
    refs: dict[str, str]  # "amd64", "arm64", "arm64-unlabelled" -> REGISTRY/REPO@sha256:...
    manifests: list[str] = field(default_factory=list)  # digests to delete afterwards

    def ref(self, name: str) -> str:
        return self.refs[name]


def build_for(directory: Path, platform: str, tag: str, labels: str) -> None:
    """One platform's image with no RUN step, so BuildKit needs no emulator for a foreign platform."""
    directory.mkdir(parents=True)
    (directory / "hello.txt").write_text(f"{platform} {tag}\n")
    (directory / "Dockerfile").write_text(f"FROM scratch\nCOPY hello.txt /hello.txt\nLABEL {labels}\n")
    docker("build", "-q", "--platform", platform, "-t", tag, str(directory))


@pytest.fixture(scope="module")
def platforms(anonymous_registry: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platforms]:
    run = uuid.uuid4().hex[:12]
    directory = tmp_path_factory.mktemp("platforms")
    found = Platforms(anonymous_registry, run, {})
    tags = []
    try:
        for name, platform, labels in (
            ("amd64", "linux/amd64", 'io.envbuild.verified="true"'),
            ("arm64", "linux/arm64", 'io.envbuild.verified="true"'),
            ("arm64-unlabelled", "linux/arm64", 'io.envbuild.test="unlabelled"'),
        ):
            tag = f"{anonymous_registry}/{REPO}:{name}-{run}"
            build_for(directory / name, platform, tag, f'{labels} io.envbuild.test.run="{run}"')
            tags.append(tag)
            push(tag)
            digest = manifest_digest(anonymous_registry, REPO, f"{name}-{run}")
            found.refs[name] = f"{anonymous_registry}/{REPO}@{digest}"
            found.manifests.append(digest)
        yield found
    finally:
        for digest in reversed(found.manifests):
            delete_manifest(anonymous_registry, REPO, digest)
        docker("rmi", *tags, check=False)


def report_for(tmp_path: Path, ref: str, report: dict, name: str) -> str:
    """A verify report file for the image id the registry holds under `ref`."""
    return write_report(tmp_path / f"{name}.json", report, image_platform(ref).image_id)


def tags_list(registry: str) -> list[str]:
    response = requests.get(f"http://{registry}/v2/{REPO}/tags/list", timeout=10)
    assert response.status_code == 200, response.text
    return response.json().get("tags") or []


def read_index(registry: str, reference: str) -> tuple[dict, str, str]:
    """(the index, its Content-Type, its digest) as a puller asking for an OCI index gets it."""
    response = requests.get(
        f"http://{registry}/v2/{REPO}/manifests/{reference}", headers={"Accept": OCI_INDEX}, timeout=10
    )
    assert response.status_code == 200, response.text
    assert (
        response.headers["Docker-Content-Digest"] == "sha256:" + hashlib.sha256(response.content).hexdigest()
    )
    return response.json(), response.headers["Content-Type"], response.headers["Docker-Content-Digest"]


def config_platform(registry: str, digest: str) -> tuple[str, str]:
    """(os, architecture) of the config blob the manifest `digest` names, read from the registry."""
    accept = (
        "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    )
    manifest = requests.get(
        f"http://{registry}/v2/{REPO}/manifests/{digest}", headers={"Accept": accept}, timeout=10
    ).json()
    config = requests.get(
        f"http://{registry}/v2/{REPO}/blobs/{manifest['config']['digest']}", timeout=10
    ).json()
    return config["os"], config["architecture"]


def test_the_images_are_one_per_platform(platforms: Platforms) -> None:
    """The fixture really made an arm64 image on this amd64 host (else the index test proves little)."""
    arm = image_platform(platforms.ref("arm64"))
    amd = image_platform(platforms.ref("amd64"))
    assert (arm.os, arm.architecture, amd.os, amd.architecture) == ("linux", "arm64", "linux", "amd64")
    assert arm.labels["io.envbuild.verified"] == "true"
    assert arm.image_id != amd.image_id


def test_promote_pushes_a_two_platform_index_and_tags_it(
    platforms: Platforms, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, amd, arm = platforms.registry, platforms.ref("amd64"), platforms.ref("arm64")
    reports = [report_for(tmp_path, amd, PASSED, "amd64"), report_for(tmp_path, arm, PASSED, "arm64")]
    tag = f"multi-{platforms.run}"
    code = main(["promote", amd, arm, "--to", tag, "--report", reports[0], "--report", reports[1]])
    out, err = capsys.readouterr()
    assert code == 0, err

    index, media_type, digest = read_index(registry, tag)
    platforms.manifests.append(digest)
    assert media_type == OCI_INDEX and index["mediaType"] == OCI_INDEX and index["schemaVersion"] == 2
    entries = {entry["digest"]: entry for entry in index["manifests"]}
    assert set(entries) == {amd.split("@")[1], arm.split("@")[1]}
    for ref, architecture in ((amd, "amd64"), (arm, "arm64")):
        entry = entries[ref.split("@")[1]]
        assert entry["platform"] == {"os": "linux", "architecture": architecture}
        assert config_platform(registry, entry["digest"]) == ("linux", architecture)
    assert resolve_digest(f"{registry}/{REPO}:{tag}") == digest
    assert read_index(registry, digest)[2] == digest  # pushed by digest as well
    assert f"pushed index {registry}/{REPO}@{digest}" in out
    assert f"promoted {registry}/{REPO}:{tag}@{digest}" in out
    assert f"linux/arm64: {arm.split('@')[1]}" in out


def test_a_platform_whose_report_failed_tags_nothing(platforms: Platforms, tmp_path: Path) -> None:
    """arm64 first: an index in this order is pushed by no other test, so its absence means something."""
    amd, arm = platforms.ref("amd64"), platforms.ref("arm64")
    arm_id = image_platform(arm).image_id
    failed = write_report(tmp_path / "failed.json", FAILED, arm_id)
    with pytest.raises(PromoteError, match="does not show a passing smoke step"):
        trusted_report(failed, arm_id)  # the file route refuses it ...
    saved = json.loads(Path(failed).read_text())
    passed = report_for(tmp_path, amd, PASSED, "amd64")
    entries = [
        PlatformImage(
            ref=arm,
            platform="linux/arm64",
            report=TrustedReport(image_id=arm_id, device="cpu", report=FAILED, digest=saved["report-digest"]),
        ),
        PlatformImage(
            ref=amd, platform="linux/amd64", report=trusted_report(passed, image_platform(amd).image_id)
        ),
    ]
    tag = f"failed-{platforms.run}"
    with pytest.raises(PromoteError) as refused:  # ... and so does the function `envbuild build` calls
        promote_platforms(entries, [tag])
    assert refused.value.message.startswith(f"{arm}: its report does not show a passing smoke step")
    assert "refusing to promote any platform" in refused.value.message
    assert tag not in tags_list(platforms.registry)
    never = "sha256:" + hashlib.sha256(index_body([image_platform(arm), image_platform(amd)])).hexdigest()
    response = requests.head(
        f"http://{platforms.registry}/v2/{REPO}/manifests/{never}", headers={"Accept": OCI_INDEX}, timeout=10
    )
    assert response.status_code == 404  # no index was pushed either
    # the same entries with a passing arm64 report do push that index: the 404 above was not luck
    entries[0] = PlatformImage(
        ref=arm,
        platform="linux/arm64",
        report=trusted_report(report_for(tmp_path, arm, PASSED, "arm"), arm_id),
    )
    promotion = promote_platforms(entries, [tag])
    platforms.manifests.append(promotion.index.split("@")[1])
    assert promotion.index == f"{platforms.registry}/{REPO}@{never}"
    assert promotion.platforms == (("linux/arm64", arm.split("@")[1]), ("linux/amd64", amd.split("@")[1]))
    assert tag in tags_list(platforms.registry)


def test_wrong_platform_unverified_and_foreign_digests_are_refused(
    platforms: Platforms, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, amd, arm = platforms.registry, platforms.ref("amd64"), platforms.ref("arm64")
    tag = f"refused-{platforms.run}"
    with pytest.raises(PromoteError, match="it was given as linux/amd64, but its config records linux/arm64"):
        promote_platforms(
            [
                PlatformImage(ref=amd, platform=None, report=None),
                PlatformImage(ref=arm, platform="amd64", report=None),
            ],
            [tag],
        )
    unlabelled = platforms.ref("arm64-unlabelled")
    code = main(["promote", amd, unlabelled, "--to", tag])
    err = capsys.readouterr().err
    assert code == 1 and "carries no io.envbuild.verified label" in err and "Traceback" not in err
    missing = f"{registry}/{REPO}@sha256:{'0' * 64}"
    with pytest.raises(EnvbuildError, match=f"manifest sha256:{'0' * 64} is not in {registry}/{REPO}"):
        promote_platforms(
            [
                PlatformImage(ref=amd, platform=None, report=None),
                PlatformImage(ref=missing, platform=None, report=None),
            ],
            [tag],
        )
    code = main(["promote", amd, arm, "--tag", f"{registry}/{REPO}:{tag}"])
    assert code == 2 and "in a registry only" in capsys.readouterr().err
    with pytest.raises(EnvbuildError, match="both linux/arm64"):
        promote_platforms(
            [
                PlatformImage(ref=arm, platform=None, report=None),
                PlatformImage(ref=arm, platform=None, report=None),
            ],
            [tag],
        )
    assert tag not in tags_list(registry)
