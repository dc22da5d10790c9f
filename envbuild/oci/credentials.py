"""A registry's credentials, found where the docker CLI finds them.

Docker Desktop, ECR, GCR/Artifact Registry and ACR logins do not live in the docker config's `auths`:
`docker login` hands them to a credential helper named in the config. For a registry host, the
docker CLI asks, and so does envbuild, the first of these that the config names:

1. `credHelpers[host]`: that helper (`"credHelpers": {"123.dkr.ecr.us-east-1.amazonaws.com": "ecr-login"}`);
2. `credsStore`: the default helper for every other host (`"credsStore": "desktop"`);
3. `auths[host]`: `auth` (base64 "user:password"), or `username` and `password`, or `identitytoken`.

Docker Hub is the key `https://index.docker.io/v1/` (the CLI's quirk; `docker.io`, `index.docker.io`
and `registry-1.docker.io` are found under it too). When a helper is named, it decides, as in the CLI:
a helper that has no credentials for the host means anonymous access, not a look at `auths`.

A helper is run with the documented protocol: `docker-credential-<name> get`, the server URL on stdin,
`{"ServerURL", "Username", "Secret"}` on stdout; "credentials not found in native keychain" on a
non-zero exit means "no credentials". Username `<token>` makes the Secret an identity token (an OAuth2
refresh token for the registry's token service). Anything else is a HelperError naming the helper
and the registry. What a helper printed is never quoted: its stdout carries the secret, and its stderr
may too. Each run waits at most HELPER_TIMEOUT_S (a helper may be waiting for a keychain prompt).

The docker SDK's own `docker.auth` decides which helper a host gets and Docker Hub's key; it is imported
here, inside the functions, so `envbuild resolve` never loads it. Its `credentials.Store` is not used
to run the helper: it has no timeout and quotes the helper's output in its errors.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild.errors import EnvbuildError
from envbuild.oci.reference import HUB_ALIASES

HELPER_TIMEOUT_S = 30.0
HELPER_PREFIX = "docker-credential-"
NOT_FOUND = "credentials not found in native keychain"


class Credentials(Record):
    """What a registry login is made of; `source` says where it came from, for messages (never the
    values). `identity_token` is set, and `username`/`password` are empty, for a token login."""

    __slots__ = ("username", "password", "identity_token", "source")
    username: str
    password: str
    identity_token: str | None
    source: str

    def __repr__(self) -> str:  # an exception's repr or a debugger must not show the secret
        return f"Credentials(username={self.username!r}, source={self.source!r})"

    def basic(self) -> tuple[str, str] | None:
        """(user, password) for HTTP basic authentication; None for an identity token."""
        return None if self.identity_token else (self.username, self.password)


class HelperError(EnvbuildError):
    """A credential helper that is missing, fails, hangs or answers nonsense (exit 1)."""


def docker_config_path(docker_config: str | None = None) -> str:
    """config.json in `docker_config`, else in $DOCKER_CONFIG, else in ~/.docker (the CLI's order)."""
    directory = (
        docker_config or os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    )
    return os.path.join(directory, "config.json")


def find_credentials(registry: str, docker_config: str | None = None) -> Credentials | None:
    """The credentials the docker CLI would use for `registry` ("ghcr.io", "127.0.0.1:5000",
    "docker.io"), or None for anonymous access. Raises HelperError when a named helper fails."""
    path = docker_config_path(docker_config)
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    from docker.auth import INDEX_NAME, INDEX_URL, AuthConfig

    hub = registry.lower() in HUB_ALIASES
    stores = {
        key: config[key]
        for key in ("credsStore", "credHelpers")
        if isinstance(config.get(key), dict if key == "credHelpers" else str) and config[key]
    }
    helper = AuthConfig(stores).get_credential_store(INDEX_NAME if hub else registry) if stores else None
    if helper:
        return run_helper(str(helper), INDEX_URL if hub else registry, registry, path)
    return _from_auths(config.get("auths"), registry, hub, path)


def _from_auths(auths: object, registry: str, hub: bool, path: str) -> Credentials | None:
    from docker.auth import resolve_index_name

    if not isinstance(auths, dict):
        return None
    wanted = {resolve_index_name(name) for name in HUB_ALIASES} if hub else {registry.lower()}
    source = f"auths in {path}"
    for key, entry in auths.items():
        if not isinstance(entry, dict) or resolve_index_name(str(key).strip().lower()) not in wanted:
            continue
        if isinstance(entry.get("identitytoken"), str) and entry["identitytoken"]:
            return Credentials(username="", password="", identity_token=entry["identitytoken"], source=source)
        if isinstance(entry.get("auth"), str) and entry["auth"]:
            try:
                user, sep, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            if sep:
                return Credentials(username=user, password=password, identity_token=None, source=source)
        if entry.get("username") and entry.get("password"):
            return Credentials(
                username=str(entry["username"]),
                password=str(entry["password"]),
                identity_token=None,
                source=source,
            )
    return None


def run_helper(name: str, server: str, registry: str, config_path: str) -> Credentials | None:
    """`docker-credential-<name> get` for `server`; None when it has no credentials for it."""
    from docker.auth import TOKEN_USERNAME

    program = HELPER_PREFIX + name
    where = f"the credential helper {program} (named for registry {registry} in {config_path})"
    check = f"`echo {server} | {program} get` shows what it answers"
    exe = shutil.which(program)
    if exe is None:
        raise HelperError(
            f"{where} is not on PATH",
            fix=f"check that {program} is installed and on PATH (it comes with Docker Desktop, "
            f"amazon-ecr-credential-helper, docker-credential-gcr, ...), or remove it from "
            f"{config_path} and run `docker login {registry}`",
        )
    try:
        done = subprocess.run(
            [exe, "get"], input=server.encode(), capture_output=True, timeout=HELPER_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise HelperError(
            f"{where} did not answer within {HELPER_TIMEOUT_S:g} s",
            fix=f"it may be waiting for a keychain or a prompt: unlock it, then {check}",
        ) from None
    except OSError as exc:
        raise HelperError(
            f"{where} could not run: {exc.strerror or type(exc).__name__}",
            fix=f"check that {exe} is an executable file",
        ) from None
    if done.returncode != 0:
        said = (done.stdout + b"\n" + done.stderr).decode("utf-8", errors="replace")
        if NOT_FOUND in said:
            return None
        raise HelperError(
            f"{where} failed (exit {done.returncode}); its output is not shown, it can hold the secret",
            fix=f"run `docker login {registry}` again; {check}",
        )
    try:
        answer = parse_json(done.stdout)
        username, secret = answer["Username"], answer["Secret"]
        if not isinstance(username, str) or not isinstance(secret, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise HelperError(
            f"{where} answered something other than the JSON object "
            '{"ServerURL", "Username", "Secret"}; it is not shown, it can hold the secret',
            fix=f"update {program}; {check}",
        ) from None
    if not username and not secret:  # docker-credential-pass answers empty values for "none"
        return None
    source = f"{program} (from {config_path})"
    if username == TOKEN_USERNAME:
        return Credentials(username="", password="", identity_token=secret, source=source)
    return Credentials(username=username, password=secret, identity_token=None, source=source)
