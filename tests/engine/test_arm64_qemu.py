"""The arm64 image end to end through QEMU (issue 19, item 4), on this x86_64 host: `envbuild build
--push` of a JAX 0.10.2 target for linux/amd64 and linux/arm64, air-gapped from the two wheelhouses
and a multi-arch Debian base in the loopback registry. BuildKit builds each platform (arm64's RUN
steps emulated), each CPU smoke step passes its gates (arm64's under QEMU), each verified image is
promoted and pushed by digest, and one OCI index over both is pushed and read back. First, the rule
that nothing is tagged while one platform fails. Emulation is slow (docs/concepts/pipeline.md, "arm64 on
an x86_64 runner"), so the emulated platform is built and smoke-tested once per session: the first test
verifies amd64 and fails arm64 at its install step (the steps before it are cached for the second), and
the second builds and verifies both. Each test still runs its own `envbuild build`, since what it checks
is that run (one fails a platform and tags nothing, the other pushes an index).

The base stands in for nvidia/cuda's ubuntu24.04 image (no image registry is reachable here): it is
Debian's Python 3.11, the wheelhouse's, while the plan names the ubuntu24.04 row's 3.12.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import requests

from envbuild.cli.app import main
from envbuild.render.context import is_envbuild_context
from tests.helpers.capability import missing
from tests.helpers.docker import architecture, docker
from tests.helpers.registry import index_over_pushed

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/jax-arm64"
TAG = "jax{framework_version}-arm64-e2e"
# strategy base-image renders jax[cuda12-local]: it loads the image's CUDA, so no nvidia-* wheels,
# and JAX runs on the CPU with it. uv (the default installer; each wheelhouse carries its platform's
# wheel) makes the venv and installs without Python running under QEMU: the emulated build takes 39 s
# cold where pip's ensurepip and install took 86 s.
JAX_ARM64_SPEC = """
[stack]
driver = "580"
cuda = "12.8"
framework = "jax==0.10.2"
python = "3.12"
os = "ubuntu24.04"
strategy = "base-image"
platform = {platform}

[image]
repository = "{repository}"
tags = ["{tag}"]
installer = "uv"

[smoke]
device = "cpu"
"""
MANIFESTS = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)
INDEX = "application/vnd.oci.image.index.v1+json"


@pytest.fixture(autouse=True)
def x86_64_host() -> None:
    if platform.machine() != "x86_64":  # on an arm64 host nothing is emulated: the claim goes unchecked
        missing(f"emulates arm64 on an x86_64 host (this one is {platform.machine()})")


def build(tmp_path: Path, spec_text: str, wheelhouse: Path, base: str, *extra: str) -> tuple[int, Path]:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(spec_text)
    out = tmp_path / "build"
    argv = ["build", "-f", str(spec), "-o", str(out), "--wheelhouse", str(wheelhouse)]
    code = main([*argv, "--base-image", base, "--smoke-device", "cpu", "--builder", "buildkit", *extra])
    return code, out


def test_a_target_of_two_platforms_tags_nothing_while_one_fails(
    tmp_path: Path,
    multi_arch_base: str,
    arm64_wheelhouse: Path,
    jax_amd64_wheelhouse: Path,
    images: list[str],
    capsys,
) -> None:
    """amd64 first: built and verified natively, then arm64 fails (the wheelhouse has uv for both
    machines but no aarch64 jaxlib, so its emulated install step fails): no tag for either. The
    failing platform is the emulated one so that each run pays for one emulated smoke step, the next
    test's, not two (about 35 s of one core under QEMU); the steps before the failing install are the
    next test's arm64 build, cached."""
    tag = f"{REPOSITORY}:jax0.10.2-arm64-e2e"
    images.append(tag)
    spec = JAX_ARM64_SPEC.format(platform='["linux/amd64", "linux/arm64"]', repository=REPOSITORY, tag=TAG)
    wheels = joined(tmp_path, jax_amd64_wheelhouse, arm64_wheelhouse, only_from_second="uv-*.whl")
    code, out = build(tmp_path, spec, wheels, multi_arch_base)
    err = capsys.readouterr().err
    assert code == 1 and "docker build failed" in err, err
    # each platform's context under the target's, which is envbuild's to replace on the next build
    assert is_envbuild_context(str(out / "default"))
    amd64 = json.loads((out / "default" / "amd64" / "record.json").read_text())
    assert amd64["status"] == "verified" and amd64["smoke"]["emulated"] is False and amd64["tags"] == []
    arm64 = json.loads((out / "default" / "arm64" / "record.json").read_text())
    assert arm64["status"] == "failed" and "verify" not in arm64["stages"] and arm64["tags"] == []
    assert "linux/arm64" in (out / "default" / "arm64" / "build.log").read_text()
    assert docker("image", "inspect", tag, check=False).returncode != 0
    assert docker("ps", "-aq", "--filter", "label=io.envbuild.role=smoke").stdout.split() == []


@pytest.fixture(scope="module")
def multi_arch_base(anonymous_registry: str, bookworm_image: str, bookworm_arm64_image: str) -> str:
    """The two local bookworm bases pushed to the loopback registry and joined in one OCI index, as
    nvidia/cuda publishes its tags: BuildKit takes each platform's manifest from it."""
    repository = f"{anonymous_registry}/envbuild-test/bookworm-multi"
    for arch, image in (("amd64", bookworm_image), ("arm64", bookworm_arm64_image)):
        docker("tag", image, f"{repository}:{arch}")
        docker("push", f"{repository}:{arch}")
    index_over_pushed(
        anonymous_registry,
        "envbuild-test/bookworm-multi",
        "latest",
        {"linux/amd64": "amd64", "linux/arm64": "arm64"},
    )
    return f"{repository}:latest"


def joined(tmp_path: Path, *houses: Path, only_from_second: str = "*.whl") -> Path:
    """One wheelhouse over several (hard links): render gives each platform's context its own wheels.
    only_from_second: the pattern of the wheels taken from the houses after the first."""
    both = tmp_path / "wheelhouse"
    both.mkdir()
    for number, house in enumerate(houses):
        for wheel in house.glob("*.whl" if number == 0 else only_from_second):
            target = both / wheel.name
            if not target.exists():
                try:
                    target.hardlink_to(wheel)
                except OSError:
                    target.write_bytes(wheel.read_bytes())
    return both


def test_a_two_platform_target_pushes_one_index_over_its_verified_images(
    tmp_path: Path,
    multi_arch_base: str,
    arm64_wheelhouse: Path,
    jax_amd64_wheelhouse: Path,
    anonymous_registry: str,
    images: list[str],
    capsys,
) -> None:
    repository = f"{anonymous_registry}/{REPOSITORY}"
    tag = "jax0.10.2-two-platforms"
    images += [f"{repository}:{tag}", f"{repository}:{tag}-amd64", f"{repository}:{tag}-arm64"]
    spec = JAX_ARM64_SPEC.format(platform='["linux/amd64", "linux/arm64"]', repository=repository, tag=tag)
    wheels = joined(tmp_path, jax_amd64_wheelhouse, arm64_wheelhouse)
    code, out = build(tmp_path, spec, wheels, multi_arch_base, "--push")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    record = json.loads((out / "default" / "record.json").read_text())
    assert record["ok"] is True and record["status"] == "promoted"
    assert "linux/arm64 emulated" in printed.out
    pushed = {}
    for arch in ("amd64", "arm64"):
        platform_record = json.loads((out / "default" / arch / "record.json").read_text())
        assert platform_record["status"] == "promoted"
        assert set(platform_record["stages"]) == {"render", "build", "audit", "verify"}
        stack = platform_record["stack"]
        assert (stack["framework"], stack["framework_version"]) == ("jax", "0.10.2")
        # the image's CUDA (jax[cuda12-local]), so no nvidia-* wheels
        requirements = (out / "default" / arch / "requirements-framework.txt").read_text()
        assert "jax[cuda12-local]==0.10.2" in requirements
        assert f"--platform linux/{arch}" in (out / "default" / arch / "build.log").read_text()
        # the smoke step ran in each image, arm64's under QEMU, on the CPU, and passed its gates
        smoke = platform_record["smoke"]
        assert smoke["passed"] is True and smoke["framework_version"] == "0.10.2"
        assert smoke["image_platform"] == f"linux/{arch}" and smoke["emulated"] is (arch == "arm64")
        assert smoke["device_used"] == "cpu" and smoke["gates"]["training"] == "passed"
        ((platform_tag, digest),) = ((p["tag"], p["digest"]) for p in platform_record["pushed"])
        assert platform_tag == f"{repository}:{tag}-{arch}" and architecture(platform_tag) == f"linux/{arch}"
        pushed[f"linux/{arch}"] = digest
    # the index the spec's tag names, read back from the registry: one manifest per platform
    index = requests.get(
        f"http://{anonymous_registry}/v2/{REPOSITORY}/manifests/{tag}", headers={"Accept": INDEX}, timeout=30
    )
    assert index.status_code == 200 and index.headers["Content-Type"].startswith(INDEX)
    assert record["index"] == f"{repository}@{index.headers['Docker-Content-Digest']}"
    entries = {
        f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
        for m in index.json()["manifests"]
    }
    assert entries == pushed  # the index lists the very digests each platform's promotion pushed
    for name, digest in entries.items():
        child = requests.get(
            f"http://{anonymous_registry}/v2/{REPOSITORY}/manifests/{digest}",
            headers={"Accept": MANIFESTS},
            timeout=30,
        )
        assert child.status_code == 200
        config = requests.get(
            f"http://{anonymous_registry}/v2/{REPOSITORY}/blobs/{child.json()['config']['digest']}",
            timeout=30,
        ).json()
        assert f"{config['os']}/{config['architecture']}" == name
        assert config["config"]["Labels"]["io.envbuild.verified"] == "true"
        assert config["config"]["Labels"]["io.envbuild.platform"] == name
    # a GPU smoke step of the arm64 image here would be emulated: refused before any container is made
    assert main(["verify", f"{repository}:{tag}-arm64", "--smoke-device", "gpu"]) == 1
    err = capsys.readouterr().err
    assert "QEMU emulation, which reaches no GPU" in err and "--smoke-device cpu" in err
