"""DSSE v1 envelopes: the spec's PAE vector, keys made by cryptography and by `openssl`, and every way
a tampered envelope fails, each naming what failed."""

from __future__ import annotations

import base64
import copy
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization

from envbuild.attest import dsse, fields
from envbuild.attest.provenance import build_provenance, statement_bytes
from envbuild.attest.record import BuildRecord
from envbuild.errors import EnvbuildError, UsageError
from tests.helpers import attest as A


def test_pae_matches_the_dsse_spec_vector() -> None:
    # protocol.md of secure-systems-lab/dsse: PAE("http://example.com/HelloWorld", "hello world")
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert dsse.pae("t", b"") == b"DSSEv1 1 t 0 "
    assert dsse.pae("\u00e9", b"x") == "DSSEv1 2 \u00e9 1 x".encode()  # byte lengths, not characters


@pytest.mark.parametrize("algorithm", ["ed25519", "p256", "p384"])
def test_sign_then_verify_round_trip(tmp_path, algorithm) -> None:
    private = A.write_key(tmp_path / "key.pem", algorithm)
    public = A.write_public(private, tmp_path / "key.pub")
    payload = statement_bytes(
        build_provenance(BuildRecord.from_json(A.record()), [(A.REPOSITORY, A.SUBJECT)])
    )
    envelope = dsse.sign(payload, dsse.load_signing_key(str(private)))
    assert envelope["payloadType"] == fields.DSSE_PAYLOAD_TYPE == "application/vnd.in-toto+json"
    assert base64.b64decode(envelope["payload"]) == payload
    (signature,) = envelope["signatures"]
    der = serialization.load_pem_public_key(public.read_bytes()).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert signature["keyid"] == hashlib.sha256(der).hexdigest()
    assert dsse.verify(json.loads(json.dumps(envelope)), dsse.load_public_key(str(public))) == payload


@pytest.mark.parametrize(
    "genpkey",
    [
        ["-algorithm", "ed25519"],
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
    ],
)
def test_keys_made_with_openssl_as_the_docs_say(tmp_path, genpkey) -> None:
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    A.openssl("genpkey", *genpkey, "-out", str(private))
    A.openssl("pkey", "-in", str(private), "-pubout", "-out", str(public))
    envelope = dsse.sign(b'{"hello":"world"}\n', dsse.load_signing_key(str(private)))
    assert dsse.verify(envelope, dsse.load_public_key(str(public))) == b'{"hello":"world"}\n'


def test_sec1_ec_private_key_from_openssl_ecparam(tmp_path) -> None:
    private = tmp_path / "ec.pem"
    A.openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(private))
    assert b"BEGIN EC PRIVATE KEY" in private.read_bytes()
    key = dsse.load_signing_key(str(private))
    assert dsse.verify(dsse.sign(b"x", key), key.public_key()) == b"x"


def test_an_encrypted_key_opens_with_the_password_variable(tmp_path, monkeypatch) -> None:
    private = A.write_key(tmp_path / "key.pem", "ed25519", password=b"correct horse")
    monkeypatch.delenv(fields.SIGN_KEY_PASSWORD_ENV, raising=False)
    with pytest.raises(UsageError) as caught:
        dsse.load_signing_key(str(private))
    assert str(private) in caught.value.message and fields.SIGN_KEY_PASSWORD_ENV in caught.value.message
    monkeypatch.setenv(fields.SIGN_KEY_PASSWORD_ENV, "wrong")
    with pytest.raises(UsageError, match="passphrase is wrong"):
        dsse.load_signing_key(str(private))
    monkeypatch.setenv(fields.SIGN_KEY_PASSWORD_ENV, "correct horse")
    assert dsse.load_signing_key(str(private)) is not None


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: A.write_key(p, "rsa"), "RSA key is not accepted"),
        (lambda p: A.write_key(p, "p521"), "curve secp521r1 is not accepted"),
        (lambda p: A.write_key(p, "secp256k1"), "curve secp256k1 is not accepted"),
        (lambda p: p.write_bytes(b"not a key at all\n") and p, "not a PEM private key"),
        (lambda p: p, "cannot read it"),
    ],
    ids=["rsa", "p521", "secp256k1", "garbage", "missing"],
)
def test_an_unusable_signing_key_is_a_usage_error_saying_how_to_make_one(tmp_path, make, said) -> None:
    path = tmp_path / "key.pem"
    make(path)
    with pytest.raises(UsageError) as caught:
        dsse.load_signing_key(str(path))
    error = caught.value
    assert said in error.message and str(path) in error.message and "--sign-key" in error.message
    assert "Ed25519 or ECDSA P-256/P-384" in error.message
    assert "openssl genpkey -algorithm ed25519 -out key.pem" in error.fix
    assert error.exit_code == 2


def test_public_and_private_keys_are_not_swapped(tmp_path) -> None:
    private = A.write_key(tmp_path / "key.pem", "ed25519")
    public = A.write_public(private, tmp_path / "key.pub")
    with pytest.raises(UsageError, match="this is a private key"):
        dsse.load_public_key(str(private))
    with pytest.raises(UsageError, match="this is a public key"):
        dsse.load_signing_key(str(public))
    rsa_public = A.write_public(A.write_key(tmp_path / "rsa.pem", "rsa"), tmp_path / "rsa.pub")
    with pytest.raises(UsageError, match=r"--key .*RSA key is not accepted"):
        dsse.load_public_key(str(rsa_public))


@pytest.fixture
def signed(tmp_path):
    private = A.write_key(tmp_path / "key.pem", "ed25519")
    public = dsse.load_public_key(str(A.write_public(private, tmp_path / "key.pub")))
    payload = statement_bytes(
        build_provenance(BuildRecord.from_json(A.record()), [(A.REPOSITORY, A.SUBJECT)])
    )
    return dsse.sign(payload, dsse.load_signing_key(str(private))), public, payload


def test_a_changed_payload_fails_as_signature_invalid(signed) -> None:
    envelope, public, payload = signed
    changed = copy.deepcopy(envelope)
    changed["payload"] = base64.b64encode(
        payload.replace(A.SUBJECT[7:].encode(), A.OTHER[7:].encode())
    ).decode()
    with pytest.raises(EnvbuildError, match="signature invalid"):
        dsse.verify(changed, public)


def test_another_key_finds_no_signature_by_it(signed, tmp_path) -> None:
    envelope, _, _ = signed
    other = dsse.load_signing_key(str(A.write_key(tmp_path / "other.pem", "p256")))
    with pytest.raises(EnvbuildError, match="no signature by this key"):
        dsse.verify(envelope, other.public_key())
    # the keyid is only a hint: a signature claiming the key's id but made by another key is invalid
    forged = copy.deepcopy(envelope)
    forged["signatures"][0]["keyid"] = dsse.keyid(other)
    with pytest.raises(EnvbuildError, match="signature invalid"):
        dsse.verify(forged, other.public_key())


def test_a_changed_payload_type_is_named(signed) -> None:
    envelope, public, _ = signed
    with pytest.raises(EnvbuildError, match="wrong payloadType 'text/plain'"):
        dsse.verify(envelope | {"payloadType": "text/plain"}, public)


def test_bad_base64_is_named(signed) -> None:
    envelope, public, _ = signed
    with pytest.raises(EnvbuildError, match="payload is not valid base64"):
        dsse.verify(envelope | {"payload": "***not base64***"}, public)


def test_url_safe_unpadded_base64_is_read(signed) -> None:
    envelope, public, payload = signed
    urlsafe = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    sig = envelope["signatures"][0]
    sig = sig | {"sig": base64.urlsafe_b64encode(base64.b64decode(sig["sig"])).decode().rstrip("=")}
    assert dsse.verify(envelope | {"payload": urlsafe, "signatures": [sig]}, public) == payload


def test_sbom_statement_wraps_the_sbom() -> None:
    sbom = A.sbom()
    wrapped = dsse.sbom_statement(sbom, [(A.REPOSITORY, A.SUBJECT)])
    assert wrapped["_type"] == fields.STATEMENT_TYPE
    assert wrapped["predicateType"] == fields.CYCLONEDX_PREDICATE == "https://cyclonedx.org/bom"
    assert wrapped["predicate"] == sbom
    assert fields.subject_digests(wrapped) == [A.SUBJECT]
