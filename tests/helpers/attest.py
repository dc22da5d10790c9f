"""Attestation test material: the e2e test's record.json, keys made on the spot, minimal SBOMs.

The SBOMs are the smallest CycloneDX 1.6 documents that carry what attest.check reads (the envbuild:
properties and the framework / cuda-runtime components): the real builder is attest.sbom's job.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from envbuild.attest import fields
from envbuild.oci import labels as L
from tests.helpers.paths import FIXTURES

RECORD = FIXTURES / "attest" / "record.json"
SUBJECT = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
REPOSITORY = "127.0.0.1:5000/envbuild-test/e2e"
SPEC_DIGEST = "sha256:99b10e7fc1a608a171052197a739223e7b25e94fdc7bcf1b43dd1aa3658a14ba"
REPORT_DIGEST = "sha256:46d377b8116c6d118788a676907165c49586977b0e115ff5773dfb24d0ebd3ab"
LOCK_DIGEST = "sha256:" + "11" * 32


def record() -> dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def write_key(path: Path, algorithm: str, *, password: bytes | None = None) -> Path:
    """A PEM private key made with cryptography: ed25519 | p256 | p384 | p521 | secp256k1 | rsa."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    makers = {
        "ed25519": ed25519.Ed25519PrivateKey.generate,
        "p256": lambda: ec.generate_private_key(ec.SECP256R1()),
        "p384": lambda: ec.generate_private_key(ec.SECP384R1()),
        "p521": lambda: ec.generate_private_key(ec.SECP521R1()),
        "secp256k1": lambda: ec.generate_private_key(ec.SECP256K1()),
        "rsa": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    }
    key = makers[algorithm]()
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    return path


def write_public(private: Path, path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private.read_bytes(), password=None)
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def openssl(*args: str) -> None:
    """Run the openssl command line (interop: keys made the way docs/attest.md says; .ci/run installs
    Debian's openssl, so a missing one fails these tests rather than skipping them)."""
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def sbom(
    *,
    lock: str | None = None,
    spec: str = SPEC_DIGEST,
    image: str = SUBJECT,
    framework: str = "2.13.0+cpu",
    cuda: str = "13.0",
    min_driver: str = "580.65.06",
    report: str = REPORT_DIGEST,
) -> dict:
    properties = [
        {"name": fields.P_SPEC_DIGEST, "value": spec},
        {"name": fields.P_IMAGE_DIGEST, "value": image},
        {"name": fields.P_MIN_DRIVER, "value": min_driver},
        {"name": fields.P_SMOKE_REPORT_DIGEST, "value": report},
    ]
    if lock:
        properties.append({"name": fields.P_LOCK_DIGEST, "value": lock})

    def component(role: str, name: str, version: str) -> dict:
        return {
            "type": "library" if role == fields.ROLE_FRAMEWORK else "framework",
            "bom-ref": f"{role}:{name}",
            "name": name,
            "version": version,
            "properties": [{"name": fields.P_COMPONENT_ROLE, "value": role}],
        }

    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {"properties": properties},
        "components": [
            component(fields.ROLE_FRAMEWORK, "torch", framework),
            component(fields.ROLE_CUDA_RUNTIME, "cuda-runtime", cuda),
        ],
    }


def image_labels(**changes: str) -> dict[str, str]:
    """The labels of the e2e image that attest.check reads."""
    labels = {
        L.SPEC_DIGEST: SPEC_DIGEST,
        L.SMOKE_REPORT_DIGEST: REPORT_DIGEST,
        L.FRAMEWORK_VERSION: "2.13.0",
        L.CUDA: "13.0",
        L.MIN_DRIVER: "580.65.06",
    }
    labels.update(changes)
    return labels
