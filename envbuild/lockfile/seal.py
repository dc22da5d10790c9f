"""What makes envbuild.lock tamper-evident: its content digest, and the optional keyed HMAC.

The content digest is an unkeyed sha256 of the lock's body. Anyone can recompute it, so it only
catches edits made without envbuild (a merge that mangled a line, a hand-edited version). The HMAC
(`ENVBUILD_LOCK_KEY` or `--lock-key-file`) is keyed: a lock written by someone without the key
cannot carry a valid one, so a team whose CI holds the key and refuses unsigned locks knows every
lock it builds was written by a key holder. Neither protects against a key holder, nor against
replaying an older lock signed with the same key for the same spec.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from envbuild.errors import LockError, UsageError

DIGEST_PREFIX = "sha256:"
HMAC_PREFIX = "hmac-sha256:"
KEY_ENV = "ENVBUILD_LOCK_KEY"
KEY_MIN_LENGTH = 16


def content_digest(body: str) -> str:
    return DIGEST_PREFIX + hashlib.sha256(body.encode()).hexdigest()


def content_hmac(body: str, key: bytes) -> str:
    return HMAC_PREFIX + hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def lock_key(key_file: str | None) -> bytes | None:
    """The HMAC key: the file --lock-key-file names, else $ENVBUILD_LOCK_KEY, else None.

    A file, not a flag value: a key on the command line is readable by every process on the host."""
    if key_file is not None:
        try:
            with open(key_file, "rb") as handle:
                key = handle.read().strip()
        except OSError as exc:
            raise UsageError(
                f"--lock-key-file {key_file}: {exc.strerror or exc}",
                fix="pass a readable file that holds the key (or set ENVBUILD_LOCK_KEY)",
            ) from None
        source = f"--lock-key-file {key_file}"
    else:
        value = os.environ.get(KEY_ENV, "")
        if not value.strip():  # CI expands a secret that is not defined to "": no key, not a bad one
            return None
        key, source = value.strip().encode(), KEY_ENV
    if len(key) < KEY_MIN_LENGTH:
        raise UsageError(
            f"{source} holds a key of {len(key)} bytes; at least {KEY_MIN_LENGTH} are needed",
            fix="generate one with `python -c 'import secrets; print(secrets.token_hex(32))'`",
        )
    return key


def seal_problems(path: str, body: str, digest: str, mac: str | None, key: bytes | None) -> list[str]:
    """Every reason the lock at `path` is not as envbuild (and, with a key, a key holder) wrote it."""
    problems = []
    if not hmac.compare_digest(digest, content_digest(body)):
        problems.append(f"{path} was edited by hand (its content digest does not match)")
    if key is not None:
        if mac is None:
            problems.append(
                f"{path} carries no content-hmac, and a lock key is set: it was not written by a key holder"
            )
        elif not hmac.compare_digest(mac, content_hmac(body, key)):
            problems.append(
                f"{path} has a content-hmac the lock key does not reproduce: "
                "edited, or signed with another key"
            )
    return problems


def judge_seal(
    path: str,
    body: str,
    digest: str,
    mac: str | None,
    *,
    key: bytes | None,
    allow_edited: bool,
    warn,
) -> None:
    """Refuse a lock whose seal does not hold (render, build); --allow-edited-lock turns that into
    a loud warning, for an emergency fix that cannot wait for `envbuild lock`."""
    problems = seal_problems(path, body, digest, mac, key)
    if mac is not None and key is None:
        warn(f"{path} carries a content-hmac, but no lock key is set ({KEY_ENV}): it was not checked")
    if not problems:
        return
    if allow_edited:
        for problem in problems:
            warn(f"--allow-edited-lock: {problem}; building from it anyway")
        return
    raise LockError(
        "; ".join(problems),
        fix="run `envbuild lock` and commit envbuild.lock "
        "(--allow-edited-lock overrides this, for emergencies)",
    )
