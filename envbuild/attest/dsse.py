"""DSSE v1 envelopes: `--sign-key` signs a statement, `envbuild attest --key` verifies it.

DSSE (https://github.com/secure-systems-lab/dsse, envelope.md and protocol.md) signs the
Pre-Authentication Encoding of (payloadType, payload), so a signature can never be replayed on a
payload of another type. It is the envelope cosign and in-toto use, so an envelope written here is
read by their tools too. Keys are Ed25519 or ECDSA P-256/P-384 in PEM, through `cryptography` (a
maintained library: no hand-written crypto here); it is imported inside the functions, since
`envbuild resolve` must not pay for it.

keyid is the sha256 hex of the public key's DER SubjectPublicKeyInfo: the same on both sides without
any registry of keys, and only a hint (DSSE: unauthenticated); verification always checks the signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from envbuild._util.jsontext import parse_json
from envbuild.attest import fields
from envbuild.attest.statement import statement
from envbuild.errors import EnvbuildError, UsageError

ACCEPTED_KEYS = (
    "accepted: PEM Ed25519 or ECDSA P-256/P-384 keys (PKCS8, SEC1 'EC PRIVATE KEY', or a public key)"
)
MAKE_KEY = (
    "make a key pair with `openssl genpkey -algorithm ed25519 -out key.pem` and its public half with "
    "`openssl pkey -in key.pem -pubout -out key.pub`"
)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's Pre-Authentication Encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in
    ASCII decimal of the UTF-8 byte counts."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def load_signing_key(path: str):
    """The private key in PEM file `path` (Ed25519 or ECDSA P-256/P-384). An encrypted key is opened with
    the passphrase in ENVBUILD_SIGN_KEY_PASSWORD. Anything else is a UsageError naming the file."""
    from cryptography.hazmat.primitives import serialization

    data = _read(path, "--sign-key")
    if b"PUBLIC KEY-----" in data and b"PRIVATE KEY-----" not in data:
        raise UsageError(
            f"--sign-key {path}: this is a public key; signing needs the private key",
            fix=f"pass the private key file (the one `openssl genpkey` wrote); {MAKE_KEY}",
        )
    password = os.environ.get(fields.SIGN_KEY_PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(
            data, password=password.encode("utf-8") if password else None
        )
    except TypeError:
        # encrypted without a passphrase, or a passphrase for a key that is not encrypted
        if password:
            raise UsageError(
                f"--sign-key {path}: {fields.SIGN_KEY_PASSWORD_ENV} is set but the key is not encrypted",
                fix=f"unset {fields.SIGN_KEY_PASSWORD_ENV}, or pass the encrypted key it belongs to",
            ) from None
        raise UsageError(
            f"--sign-key {path}: the key is encrypted and {fields.SIGN_KEY_PASSWORD_ENV} is not set",
            fix=f"export {fields.SIGN_KEY_PASSWORD_ENV} with its passphrase (a CI secret), or {MAKE_KEY}",
        ) from None
    except (ValueError, binascii.Error) as exc:
        wrong = "the passphrase is wrong or " if password else ""
        raise UsageError(
            f"--sign-key {path}: {wrong}not a PEM private key envbuild can read ({_short(exc)}); "
            + ACCEPTED_KEYS,
            fix=MAKE_KEY,
        ) from None
    except Exception as exc:  # cryptography's UnsupportedAlgorithm and kin
        raise UsageError(f"--sign-key {path}: {_short(exc)}; {ACCEPTED_KEYS}", fix=MAKE_KEY) from None
    _check_algorithm(key, path, "--sign-key")
    return key


def load_public_key(path: str):
    """The public key in PEM file `path` (SubjectPublicKeyInfo, Ed25519 or ECDSA P-256/P-384)."""
    from cryptography.hazmat.primitives import serialization

    data = _read(path, "--key")
    if b"PRIVATE KEY-----" in data:
        raise UsageError(
            f"--key {path}: this is a private key; verification takes the public key, which can be shared",
            fix=f"openssl pkey -in {path} -pubout -out key.pub, and pass key.pub",
        )
    try:
        key = serialization.load_pem_public_key(data)
    except Exception as exc:
        raise UsageError(
            f"--key {path}: not a PEM public key envbuild can read ({_short(exc)}); {ACCEPTED_KEYS}",
            fix=MAKE_KEY,
        ) from None
    _check_algorithm(key, path, "--key")
    return key


def keyid(key) -> str:
    """sha256 hex of the DER SubjectPublicKeyInfo of `key` (a private or a public key)."""
    from cryptography.hazmat.primitives import serialization

    public = key.public_key() if hasattr(key, "private_bytes") else key
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def sign(payload: bytes, key, payload_type: str = fields.DSSE_PAYLOAD_TYPE) -> dict:
    """A DSSE envelope of `payload` signed with private `key` (ECDSA signatures are DER, as cosign's)."""
    message = pae(payload_type, payload)
    if _is_ecdsa(key):
        from cryptography.hazmat.primitives.asymmetric import ec

        signature = key.sign(message, ec.ECDSA(_hash_for(key)))
    else:
        signature = key.sign(message)
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid(key), "sig": base64.b64encode(signature).decode("ascii")}],
    }


def verify(envelope: dict, public_key, payload_type: str = fields.DSSE_PAYLOAD_TYPE) -> bytes:
    """The payload of `envelope` once a signature by `public_key` verifies over its PAE; otherwise an
    EnvbuildError naming what failed (the envelope's shape, its base64, its payloadType, no signature
    by this key, or a signature that does not verify)."""
    from cryptography.exceptions import InvalidSignature

    payload = envelope_payload(envelope, payload_type)
    message = pae(envelope["payloadType"], payload)
    mine = keyid(public_key)
    listed = envelope.get("signatures")
    signatures = [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []
    # keyid is an unauthenticated hint: try every signature that names this key or names none
    candidates = [s for s in signatures if s.get("keyid") in (None, "", mine)]
    if not candidates:
        others = ", ".join(str(s.get("keyid"))[:12] + "…" for s in signatures) or "none"
        raise EnvbuildError(
            f"DSSE envelope: no signature by this key (keyid {mine[:12]}…; the envelope's keyids: {others})",
            fix="verify with the public key of the --sign-key the image was attested with",
        )
    for entry in candidates:
        try:
            signature = _b64(entry.get("sig"), "signatures[].sig")
        except EnvbuildError:
            continue
        try:
            if _is_ecdsa(public_key):
                from cryptography.hazmat.primitives.asymmetric import ec

                public_key.verify(signature, message, ec.ECDSA(_hash_for(public_key)))
            else:
                public_key.verify(signature, message)
        except InvalidSignature:
            continue
        return payload
    raise EnvbuildError(
        f"DSSE envelope: signature invalid for key {mine[:12]}… (the payload or the signature was changed "
        "after signing)",
        fix="the document is not the one that was signed: do not use the image until it is re-attested",
    )


def envelope_payload(envelope: object, payload_type: str = fields.DSSE_PAYLOAD_TYPE) -> bytes:
    """The decoded payload of a DSSE envelope, its shape and payloadType checked, its signatures NOT:
    for reading a signed document when no key was given."""
    if not isinstance(envelope, dict) or not isinstance(envelope.get("payloadType"), str):
        raise EnvbuildError(
            "DSSE envelope: not an object with payloadType, payload and signatures",
            fix="the attachment is not a DSSE envelope; re-attest the image",
        )
    if envelope["payloadType"] != payload_type:
        raise EnvbuildError(
            f"DSSE envelope: wrong payloadType {envelope['payloadType']!r}; expected {payload_type!r}",
            fix="the envelope carries another kind of document; re-attest the image",
        )
    return _b64(envelope.get("payload"), "payload")


def parse_envelope(body: bytes) -> dict:
    """A DSSE envelope from its JSON bytes, or an EnvbuildError saying it is not one."""
    try:
        envelope = parse_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvbuildError(f"DSSE envelope: not JSON ({exc})", fix="re-attest the image") from None
    envelope_payload(envelope, envelope.get("payloadType") if isinstance(envelope, dict) else "")
    return envelope


def sbom_statement(sbom: dict, subjects: list[tuple[str, str]]) -> dict:
    """The Statement a signed SBOM is wrapped in before its envelope (as `cosign attest --type
    cyclonedx` does): predicateType CycloneDX, predicate the SBOM itself."""
    return statement(subjects, fields.CYCLONEDX_PREDICATE, sbom)


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot read it ({exc.strerror or exc}); {ACCEPTED_KEYS}", fix=MAKE_KEY
        ) from None


def _check_algorithm(key, path: str, flag: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        return
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        if key.curve.name in ("secp256r1", "secp384r1"):
            return
        what = f"an ECDSA key on curve {key.curve.name}"
    else:
        what = (
            f"a {type(key).__name__.removeprefix('_').replace('PrivateKey', '').replace('PublicKey', '')} key"
        )
    raise UsageError(f"{flag} {path}: {what} is not accepted; {ACCEPTED_KEYS}", fix=MAKE_KEY)


def _is_ecdsa(key) -> bool:
    from cryptography.hazmat.primitives.asymmetric import ec

    return isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey))


def _hash_for(key):
    """SHA-256 for P-256, SHA-384 for P-384: the hash the curve's strength asks for (as cosign)."""
    from cryptography.hazmat.primitives import hashes

    return hashes.SHA384() if key.curve.name == "secp384r1" else hashes.SHA256()


def _b64(value: object, field: str) -> bytes:
    """DSSE allows standard or URL-safe base64, padded or not."""
    if not isinstance(value, str):
        raise EnvbuildError(f"DSSE envelope: {field} is missing or not a string", fix="re-attest the image")
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EnvbuildError(
            f"DSSE envelope: {field} is not valid base64", fix="re-attest the image"
        ) from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__
