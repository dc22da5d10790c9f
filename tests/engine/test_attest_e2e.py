"""Issue 20 end to end, on the real Engine and the real registry on 127.0.0.1: a locked torch image
built air-gapped, verified with the CPU smoke step and pushed with `envbuild build --push --sign-key`,
gets a CycloneDX SBOM and SLSA provenance attached to its digest; `envbuild attest` checks them, a
registry-side promotion keeps them, and tampering makes it fail naming what failed.

One build for the module (about a minute warm): every test reads what it pushed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex
from envbuild.attest import fields
from envbuild.attest.attach import attach_documents, fetch_documents
from envbuild.attest.record import BuildRecord
from envbuild.cli.app import main
from envbuild.host.doctor import attestation_checks
from envbuild.lockfile.read import load_lock
from tests.helpers.docker import docker
from tests.helpers.locking import spec_text
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker

SECRET = "s3cr3t-registry-password-for-the-leak-test"
HF_TOKEN = "hf_leakcheckleakcheckleakcheck0123"


def _key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
    bookworm_image: str,
    framework_wheels: Path,
    wheelhouse: Path,
    anonymous_registry: str,
) -> dict:
    """Lock against loopback indexes, then `build --push --sign-key` with a registry login and an
    HF_TOKEN in the environment (neither may reach an attachment)."""
    root = tmp_path_factory.mktemp("attest-e2e")
    base = f"{anonymous_registry}/envbuild-test/attest-base:latest"
    docker("tag", bookworm_image, base)
    push(base)
    user_dir = root / "user-wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "six==1.16.0", "-d", str(user_dir)],
        check=True,
    )
    house = root / "wheelhouse"
    shutil.copytree(framework_wheels, house)
    shutil.copy(next(user_dir.glob("six-*.whl")), house)
    shutil.copy(next(wheelhouse.glob("uv-*.whl")), house)
    repository = f"{anonymous_registry}/envbuild-test/attest"
    spec = root / "envbuild.toml"
    with PackageIndex(user_dir) as user, PackageIndex(framework_wheels) as framework:
        spec.write_text(
            spec_text(user.url, framework.url, '["six==1.16.0"]')
            + f'\n[image]\nrepository = "{repository}"\ntags = ["e2e"]\n'
        )
        assert main(["lock", "-f", str(spec), "--base-image", base]) == 0
    private, public = _key_pair(root, "signer")
    _, other = _key_pair(root, "other")
    config = root / "docker-config"
    config.mkdir()
    import base64

    auth = base64.b64encode(f"ci-user:{SECRET}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {anonymous_registry: {"auth": auth}}}))
    out = root / "build"
    env = {"DOCKER_CONFIG": str(config), "HF_TOKEN": HF_TOKEN}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        code = main(
            [
                "build",
                "-f",
                str(spec),
                "-o",
                str(out),
                "--wheelhouse",
                str(house),
                "--base-image",
                base,
                "--smoke-device",
                "cpu",
                "--push",
                "--sign-key",
                str(private),
            ]
        )
    assert code == 0
    record = json.loads((out / "default" / "record.json").read_text())
    lock, _ = load_lock(str(root / "envbuild.lock"))
    yield {
        "root": root,
        "out": out,
        "record": record,
        "lock": lock.targets[0],
        "repository": repository,
        "registry": anonymous_registry,
        "public": public,
        "other": other,
        "digest": manifest_digest(anonymous_registry, "envbuild-test/attest", "e2e"),
    }
    docker("rmi", "-f", f"{repository}:e2e", base, check=False)


def _unwrap(artifact) -> dict:
    """The statement inside a DSSE envelope."""
    import base64

    envelope = json.loads(artifact.payload)
    return json.loads(base64.b64decode(envelope["payload"]))


def _documents(built: dict, ref: str | None = None) -> tuple[str, dict, str]:
    return fetch_documents(ref or f"{built['repository']}@{built['digest']}")


def test_build_push_attaches_a_signed_sbom_and_provenance_to_the_pushed_digest(built: dict) -> None:
    record, lock = built["record"], built["lock"]
    digest, found, path = _documents(built)
    assert digest == built["digest"] == record["pushed"][0]["digest"]
    # docker-registry 2.8 predates the OCI 1.1 referrers API: the tag schema is the path it takes
    assert path == "referrers-tag"
    assert set(found) == {fields.KIND_SBOM, fields.KIND_PROVENANCE}
    assert {a.media_type for a in found.values()} == {fields.DSSE_MEDIA_TYPE}
    assert {a.subject_digest for a in found.values()} == {digest}
    assert [item["path"] for item in record["attestations"]["attached"]] == ["referrers-tag"] * 2

    sbom = _unwrap(found[fields.KIND_SBOM])["predicate"]
    by_name = {c["name"]: c for c in sbom["components"]}
    torch = by_name["torch"]
    locked = next(p for p in lock.packages if p.name == "torch")
    assert torch["version"].startswith("2.13.0")
    (hash_,) = torch["hashes"]
    assert "sha256:" + hash_["content"] in locked.hashes  # the installed wheel's, one the lock allows
    python3 = by_name["python3"]
    assert python3["purl"].startswith("pkg:deb/debian/python3@3.11")
    roles = {
        p["value"]: c
        for c in sbom["components"]
        for p in c.get("properties", [])
        if p["name"] == "envbuild:role"
    }
    assert roles["cuda-runtime"]["version"] == record["stack"]["cuda"]
    assert roles["cudnn"]["version"] == record["stack"]["cudnn"]
    assert roles["nccl"]["version"] == record["stack"]["nccl"]
    assert fields.sbom_property(sbom, fields.P_MIN_DRIVER) == record["stack"]["min_driver"]
    assert fields.sbom_property(sbom, fields.P_REQUIRE_CUDA) == "cuda>=13.0"
    assert fields.sbom_property(sbom, fields.P_LOCK_DIGEST) == record["lock_digest"]
    assert fields.sbom_property(sbom, fields.P_SMOKE_REPORT_DIGEST) == record["report_digest"]

    statement = _unwrap(found[fields.KIND_PROVENANCE])
    assert fields.subject_digests(statement) == [digest]
    assert fields.provenance_lock_digest(statement) == record["lock_digest"]
    uris = [d.get("uri", "") for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]]
    assert any(uri.startswith("pkg:pypi/torch@2.13.0") for uri in uris)

    # the files next to record.json are the same documents, unsigned, and rebuild from record.json
    from envbuild.attest.provenance import build_provenance, statement_bytes

    directory = built["out"] / "default"
    assert json.loads((directory / fields.PROVENANCE_FILE).read_text()) == statement
    assert json.loads((directory / fields.SBOM_FILE).read_text()) == sbom
    subjects = [(built["repository"], digest)]
    assert (
        statement_bytes(build_provenance(BuildRecord.from_json(record), subjects))
        == (directory / fields.PROVENANCE_FILE).read_bytes()
    )


def test_no_credential_reaches_an_attachment_or_a_file(built: dict) -> None:
    _, found, _ = _documents(built)
    texts = [a.payload.decode() for a in found.values()]
    texts += [_unwrap(a) and json.dumps(_unwrap(a)) for a in found.values()]
    texts += [p.read_text() for p in (built["out"] / "default").glob("*.json")]
    for text in texts:
        assert SECRET not in text and HF_TOKEN not in text
        assert "ci-user" not in text


def test_attest_checks_the_attachments_with_the_key(built: dict, capsys) -> None:
    ref = f"{built['repository']}@{built['digest']}"
    assert main(["attest", ref, "--key", str(built["public"]), "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] is True and checked["signing"] == "verified" and checked["path"] == "referrers-tag"
    names = {c["name"] for c in checked["checks"]}
    assert {"sbom signature", "provenance signature", "lock digest", "label spec digest"} <= names
    # without a key the signatures are reported, not checked
    assert main(["attest", ref]) == 0
    assert "signed, not checked" in capsys.readouterr().out
    # doctor --image's one line, read from the same registry
    (line,) = attestation_checks(ref)
    assert line.status == "ok" and line.evidence.startswith("attestations: SBOM + provenance for sha256:")
    assert line.evidence.endswith("signed, not checked, 18/18 checks passed")


def test_a_registry_side_promotion_keeps_the_attachments(built: dict, capsys) -> None:
    ref = f"{built['repository']}@{built['digest']}"
    assert main(["promote", ref, "--to", "promoted-attest"]) == 0
    capsys.readouterr()
    assert main(["attest", f"{built['repository']}:promoted-attest", "--key", str(built["public"])]) == 0
    assert "checks passed" in capsys.readouterr().out


def test_promote_push_of_a_verified_image_attaches_its_documents(built: dict, capsys) -> None:
    """`verify --report` then `promote --push`: no build record, so the facts come from the image's
    labels and the report; the documents are attached to the pushed digest all the same."""
    image = built["record"]["images"]["built"]
    report = built["root"] / "smoke.json"
    assert main(["verify", image, "--smoke-device", "cpu", "--report", str(report)]) == 0
    tag = f"{built['repository']}:promote-push"
    code = main(["promote", image, "--report", str(report), "--tag", tag, "--push"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "attached the sbom" in out and "attached the provenance" in out
    digest, found, _ = fetch_documents(tag)
    assert set(found) == {fields.KIND_SBOM, fields.KIND_PROVENANCE}
    sbom = json.loads(found[fields.KIND_SBOM].payload)  # unsigned: the document itself
    assert fields.sbom_property(sbom, fields.P_IMAGE_DIGEST) == digest
    assert fields.sbom_property(sbom, fields.P_SMOKE_DEVICE) == "cpu"
    assert {c["name"] for c in sbom["components"]} >= {"torch", "python3", "six"}
    assert main(["attest", tag]) == 0
    assert "checks passed" in capsys.readouterr().out
    docker("rmi", "-f", tag, check=False)


def test_another_key_fails_naming_the_signatures(built: dict, capsys) -> None:
    ref = f"{built['repository']}@{built['digest']}"
    assert main(["attest", ref, "--key", str(built["other"])]) == 1
    out = capsys.readouterr().out
    assert "FAIL  sbom signature" in out and "FAIL  provenance signature" in out


def test_a_changed_sbom_or_a_wrong_subject_fails_naming_the_check(built: dict, capsys) -> None:
    """An attacker with push rights attaches a newer, edited SBOM to the image, and the provenance of
    this image to another one: attest finds and names both."""
    ref = f"{built['repository']}@{built['digest']}"
    _, found, _ = _documents(built)
    envelope = json.loads(found[fields.KIND_SBOM].payload)
    import base64

    inner = json.loads(base64.b64decode(envelope["payload"]))
    inner["predicate"]["components"][0]["version"] = "9.9.9"
    envelope["payload"] = base64.b64encode(json.dumps(inner).encode()).decode()
    attach_documents(ref, [(fields.KIND_SBOM, json.dumps(envelope).encode(), fields.DSSE_MEDIA_TYPE)])
    assert main(["attest", ref, "--key", str(built["public"])]) == 1
    assert "FAIL  sbom signature" in capsys.readouterr().out

    # the (valid, signed) provenance of this image attached to the base image's digest
    base_digest = manifest_digest(built["registry"], "envbuild-test/attest-base", "latest")
    other = f"{built['registry']}/envbuild-test/attest-base@{base_digest}"
    attach_documents(
        other, [(fields.KIND_PROVENANCE, found[fields.KIND_PROVENANCE].payload, fields.DSSE_MEDIA_TYPE)]
    )
    assert main(["attest", other, "--key", str(built["public"])]) == 1
    out = capsys.readouterr().out
    assert "FAIL  provenance statement subject" in out and "FAIL  sbom present" in out


def _engine_events(since: float, until: float) -> list[dict]:
    """The Engine's container and image events between two times (docker events replays them)."""
    listed = docker(
        "events",
        "--since",
        f"{since:.3f}",
        "--until",
        f"{until:.3f}",
        "--filter",
        "type=container",
        "--filter",
        "type=image",
        "--format",
        "{{json .}}",
    ).stdout
    return [json.loads(line) for line in listed.splitlines() if line.strip()]


def test_attach_from_the_registry_with_the_verify_report(built: dict, capsys, tmp_path: Path) -> None:
    """The CI flow: a builder pushed the candidate (the build's image before promotion: no smoke
    label), the verify job ran `verify --report` on its digest, and the promote job's
    `attest --attach --report` reads it from the registry, with no pull and no inventory container;
    `attest` then passes. The candidate goes to a repository of its own: attachments are per
    repository, so this test's unsigned ones never meet the signed ones the other tests check."""
    import time

    repository = f"{built['registry']}/envbuild-test/attest-attach"
    docker("tag", built["record"]["images"]["built"], f"{repository}:e2e")
    try:
        push(f"{repository}:e2e")
        ref = f"{repository}@{manifest_digest(built['registry'], 'envbuild-test/attest-attach', 'e2e')}"
        report = tmp_path / "smoke.json"
        assert main(["verify", ref, "--smoke-device", "cpu", "--report", str(report)]) == 0
        capsys.readouterr()
        since = time.time()
        code = main(
            ["attest", ref, "--attach", "--report", str(report), "-f", str(built["root"] / "envbuild.toml")]
        )
        until = time.time() + 1
        assert code == 0, capsys.readouterr().err
        events = _engine_events(since, until)
        inventory = [
            e
            for e in events
            if e.get("Type") == "container"
            and (e.get("Actor") or {}).get("Attributes", {}).get("io.envbuild.role") == "inventory"
        ]
        pulls = [e for e in events if e.get("Type") == "image" and "attest-attach" in str(e.get("id"))]
        assert inventory == [] and pulls == []
        capsys.readouterr()
        code = main(["attest", ref, "--json"])
        checked = json.loads(capsys.readouterr().out)
        assert code == 0 and checked["ok"] is True, [c for c in checked["checks"] if not c.get("ok", True)]
        assert {"lock digest", "label spec digest"} <= {c["name"] for c in checked["checks"]}
        # -f named the spec, so its envbuild.lock reached both documents (issue 32: -f was ignored,
        # and they said "neither names a lock (built unlocked)")
        lock_digest = "sha256:" + hashlib.sha256((built["root"] / "envbuild.lock").read_bytes()).hexdigest()
        (named,) = (c for c in checked["checks"] if c["name"] == "lock digest")
        assert named["ok"] is True and named["detail"] == lock_digest, named
        # the promoted image's label names its own report: this one would contradict it
        promoted = f"{built['repository']}@{built['digest']}"
        assert main(["attest", promoted, "--attach", "--report", str(report)]) == 1
        assert "not the smoke report this image was promoted with" in capsys.readouterr().err
    finally:
        docker("rmi", f"{repository}:e2e", check=False)
