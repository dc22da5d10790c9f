"""Issue 32 end to end: a real CUDA image, not the CPU torch every other test builds. torch 2.6.0's PyPI
build (cu124) and its thirteen nvidia-* wheels (about 2.9 GB, tests/helpers/cudastack.py) are locked
against a loopback index with uv, then `envbuild build --push` runs every stage on them, air-gapped
from a wheelhouse: build, the audit gate for the spec's GPUs, the smoke step (a CUDA torch trains on
the CPU), promote to the registry on 127.0.0.1, and the SBOM and provenance attached to the pushed
digest. `envbuild attest` of that digest must then pass.

Before this issue the audit failed such an image: cuobjdump 13.x stops partway through cuBLAS 12.4's
libraries, and that stopped the build. One build for the module (about 4 minutes on 2 cores, most of
it the push), then a rebuild after a user package changed, which must audit only its new layer.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.attest import fields
from envbuild.attest.attach import fetch_documents
from envbuild.cli.app import main
from envbuild.refresh import cuda_wheels
from tests.helpers import cudastack
from tests.helpers.docker import docker
from tests.helpers.paths import REPO
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker

REPOSITORY = "envbuild-test/cuda-e2e"
GPUS = ("H100", "A100")  # sm_90 and sm_80: libtorch_cuda.so carries SASS for both


def _link_or_copy(source: Path, directory: Path) -> None:
    try:
        os.link(source, directory / source.name)
    except OSError:  # another filesystem: 2.9 GB copied once per run
        shutil.copy(source, directory / source.name)


def _spec(user_url: str, framework_url: str, repository: str, six: str) -> str:
    return (
        f'[stack]\ndriver = "550"\ngpus = {json.dumps(list(GPUS))}\nframework = "torch==2.6.0"\n'
        'python = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = ["six=={six}"]\nindex-url = "{user_url}"\n'
        f'framework-index-url = "{framework_url}"\n\n'
        f'[image]\nrepository = "{repository}"\ntags = ["e2e"]\n'
    )


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
    bookworm_image: str,
    cuda_wheelhouse: Path,
    wheelhouse: Path,
    anonymous_registry: str,
) -> dict:
    """Lock against loopback indexes, then `build --push` from a wheelhouse of the real wheels."""
    root = tmp_path_factory.mktemp("cuda-e2e")
    base = f"{anonymous_registry}/envbuild-test/cuda-e2e-base:latest"
    docker("tag", bookworm_image, base)
    push(base)
    user = root / "user-wheels"
    user.mkdir()
    for pattern in ("six-1.16.0-*.whl", "six-1.17.0-*.whl"):
        shutil.copy(next(wheelhouse.glob(pattern)), user)
    house = root / "wheelhouse"
    house.mkdir()
    for wheel in [*cuda_wheelhouse.glob("*.whl"), *user.glob("*.whl"), next(wheelhouse.glob("uv-*.whl"))]:
        _link_or_copy(wheel, house)
    repository = f"{anonymous_registry}/{REPOSITORY}"
    spec = root / "envbuild.toml"
    # the rebuild goes to the same directory, as a user's would: BuildKit then sends only what changed
    # of the 2.9 GB context, where a new directory is a new context (and 2.9 GB more of build cache)
    out, first = root / "build", root / "first"

    def build(into: Path, *more: str) -> int:
        flags = ["-f", str(spec), "-o", str(into), "--wheelhouse", str(house), "--base-image", base]
        return main(["build", *flags, "--smoke-device", "cpu", *more])

    with PackageIndex(user) as user_index, PackageIndex(cuda_wheelhouse, core_metadata=True) as framework:
        urls = (user_index.url, framework.url)
        spec.write_text(_spec(*urls, repository, "1.16.0"))
        assert main(["lock", "-f", str(spec), "--base-image", base]) == 0
        assert build(out, "--push") == 0
        shutil.copytree(out / "default", first, ignore=shutil.ignore_patterns("wheels", "uv"))
        record = json.loads((first / "record.json").read_text())
        # day 2: a user package changes; the framework and CUDA layers are the same bytes
        spec.write_text(_spec(*urls, repository, "1.17.0"))
        assert main(["lock", "-f", str(spec), "--base-image", base]) == 0
    assert build(out) == 0
    rebuilt = json.loads((out / "default" / "record.json").read_text())
    yield {
        "root": root,
        "first": first,  # the first build's files (record, SBOM, provenance)
        "spec": spec,
        "record": record,
        "rebuilt": rebuilt,
        "repository": repository,
        "digest": manifest_digest(anonymous_registry, REPOSITORY, "e2e"),
    }
    # the rebuild took the :e2e tag, so the first build's 5.85 GB image is untagged now: removed by id,
    # with every image both builds made (a run left one such image in the Engine before)
    # (a label-only promoted image before the image it sits on, which cannot go while it has a child)
    made = [r["images"].get(k) for k in ("promoted", "built") for r in (rebuilt, record)]
    docker("rmi", "-f", f"{repository}:e2e", base, *dict.fromkeys(i for i in made if i), check=False)


def _libraries(record: dict) -> dict[str, dict]:
    return {Path(entry["path"]).name: entry for entry in record["audit"]["libraries"]}


def test_the_audit_judges_the_real_image_and_reports_what_cuobjdump_could_not_finish(built: dict) -> None:
    record = built["record"]
    assert record["status"] == "promoted" and record["ok"] is True, record.get("error")
    assert record["audit"]["ok"] is True and record["audit"]["framework"] == "torch"
    libraries = _libraries(record)
    deciding = libraries["libtorch_cuda.so"]
    assert deciding["counts"] is True and deciding["unread"] is None
    assert {"sm_80", "sm_90"} <= set(deciding["sass"])
    # cuobjdump 13.x lists cuBLAS 12.4's entries, then stops with a fatal error: kept, judged, reported
    cublas = libraries["libcublas.so.12"]
    assert cublas["counts"] is False and "cuobjdump" in cublas["unread"]
    assert cublas["sass"], "the entries cuobjdump listed before it stopped are kept"
    assert any("libcublas.so.12" in line and "partly read" in line for line in record["audit"]["warnings"])


def test_each_nvidia_library_reads_in_the_image_as_the_matrix_table_says(built: dict) -> None:
    """The audit read every library of the thirteen nvidia-* wheels in the image: each must read as
    its wheel's row in matrix/README.md says (whole, partly, not at all, no device code: by absence),
    with the same reason. This is what spares tests/integration/test_cuda_wheels_table.py reading the
    large wheels again."""
    rows = cuda_wheels.table_rows((REPO / "matrix" / "README.md").read_text(encoding="utf-8"))
    audited: dict[str, list[dict]] = {}
    for entry in built["record"]["audit"]["libraries"]:
        audited.setdefault(Path(entry["path"]).name, []).append(entry)
    checked = 0
    for package, (version, _) in cudastack.pinned().items():
        if not package.startswith("nvidia-"):
            continue
        for library in rows[(package, version)].libraries:
            readings = [cuda_wheels.audited_reading(entry) for entry in audited.get(library.name, [])]
            assert readings or library.read == cuda_wheels.NO_DEVICE_CODE, library
            assert all(reading == (library.read, library.reason) for reading in readings), (library, readings)
            checked += 1
    assert checked == 29  # the shared objects of the 13 wheels, as their rows list them


def test_the_cuda_build_trains_on_the_cpu_and_reports_its_cuda_stack(built: dict) -> None:
    smoke = built["record"]["smoke"]
    assert smoke["passed"] is True and smoke["device_used"] == "cpu" and smoke["loss_decreased"] is True
    assert smoke["framework_version"] == "2.6.0+cu124"
    # what the image's torch was built with: the wheels' CUDA 12.4, cuDNN 9.1 and NCCL 2.21.5
    assert smoke["cuda_runtime"] == "12.4"
    assert smoke["cudnn"].startswith("9.1.0") and smoke["nccl"] == "2.21.5"
    stack = built["record"]["stack"]
    assert (stack["cuda"], stack["cudnn"], stack["nccl"]) == ("12.4", "9.1.0.70", "2.21.5")


def test_the_pushed_digest_is_attested_with_every_wheel_and_its_hash(built: dict) -> None:
    record, digest = built["record"], built["digest"]
    assert digest == record["pushed"][0]["digest"]
    ref = f"{built['repository']}@{digest}"
    assert main(["attest", ref, "-f", str(built["spec"])]) == 0
    _, found, _ = fetch_documents(ref)
    sbom = json.loads(found[fields.KIND_SBOM].payload)
    assert sbom == json.loads((built["first"] / fields.SBOM_FILE).read_text())
    components = {c["name"]: c for c in sbom["components"] if "pkg:pypi/" in c.get("purl", "")}
    for name, (version, sha256) in cudastack.pinned().items():
        assert components[name]["version"] == version, name
        assert components[name]["hashes"] == [{"alg": "SHA-256", "content": sha256}], name
    roles = {
        p["value"]: c["version"]
        for c in sbom["components"]
        for p in c.get("properties", [])
        if p["name"] == "envbuild:role"
    }
    assert (roles["cuda-runtime"], roles["cudnn"], roles["nccl"]) == ("12.4", "9.1.0.70", "2.21.5")
    assert fields.sbom_property(sbom, fields.P_LOCK_DIGEST) == record["lock_digest"]
    assert fields.sbom_property(sbom, fields.P_REQUIRE_CUDA) == "cuda>=12.4"


def test_a_rebuild_after_a_user_package_changed_audits_only_the_new_layers(built: dict) -> None:
    first, rebuilt = built["record"], built["rebuilt"]
    assert rebuilt["status"] == "promoted" and rebuilt["audit"]["ok"] is True
    assert rebuilt["images"]["built"] != first["images"]["built"]
    before, after = (
        json.loads(
            docker(
                "image", "inspect", record["images"]["built"], "--format", "{{json .RootFS.Layers}}"
            ).stdout
        )
        for record in (first, rebuilt)
    )
    new = [layer for layer in after if layer not in before]
    layers = rebuilt["audit"]["layers"]
    assert 1 <= layers["read"] == len(new) < len(after) // 2  # the user layer and what follows it
    assert layers["read"] + layers["cached"] == layers["total"] == len(after)
    # the verdicts are the same: the libraries that changed are none of the GPU ones
    assert _libraries(rebuilt) == _libraries(first)
