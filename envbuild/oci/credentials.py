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
may too. Each run waits at most HELPER_TIMEOUT_S (a helper may be waiting for a keychain prompt), and
its output is read from the pipe up to limits.HELPER_OUTPUT_BYTES: a helper that prints 2 GB is
stopped there (and killed), not buffered whole (issue 33). The config itself is checked for shape
(`"auths": 5`, `"credHelpers": []`, an auth entry that is a string): a ConfigError naming the key,
where a wrong shape used to be skipped in silence or to crash.

The docker SDK's own `docker.auth` decides which helper a host gets and Docker Hub's key; it is imported
here, inside the functions, so `envbuild resolve` never loads it. Its `credentials.Store` is not used
to run the helper: it has no timeout and quotes the helper's output in its errors.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time

from envbuild._util import limits
from envbuild._util.files import NotReadable, read_regular
from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild.errors import EnvbuildError
from envbuild.oci.reference import HUB_ALIASES

HELPER_TIMEOUT_S = 30.0
HELPER_PREFIX = "docker-credential-"
NOT_FOUND = "credentials not found in native keychain"
_HELPER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", re.ASCII)  # docker-credential-<name>


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


class ConfigError(EnvbuildError):
    """A docker config.json that is not JSON or not shaped as the docker CLI writes it (exit 1)."""


def _config_error(path: str, what: str) -> ConfigError:
    return ConfigError(
        f"{path}: {what}",
        fix="fix or remove that key (the docker CLI writes "
        '{"auths": {"<host>": {"auth": "<base64 user:password>"}}, "credsStore": "<helper>", '
        '"credHelpers": {"<host>": "<helper>"}}), or run `docker login` again',
    )


def _load_config(path: str) -> dict | None:
    """The config at `path`, its keys envbuild reads checked for shape; None when there is none."""
    try:
        raw = read_regular(path, limit=limits.FILE_BYTES.get())
    except FileNotFoundError:
        return None
    except NotReadable as exc:
        raise _config_error(path, f"is {exc}") from None
    except OSError as exc:
        raise _config_error(path, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        config = parse_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        shown = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise _config_error(path, f"is not JSON ({shown})") from None
    if not isinstance(config, dict):
        raise _config_error(path, f"is a JSON {type(config).__name__}, not an object")
    store = config.get("credsStore")
    if store is not None and not (isinstance(store, str) and (not store or _HELPER_NAME.fullmatch(store))):
        raise _config_error(path, "credsStore must be a helper's name (docker-credential-<name>)")
    helpers = config.get("credHelpers")
    if helpers is not None:
        if not isinstance(helpers, dict):
            raise _config_error(
                path, f"credHelpers is a JSON {_kind(helpers)}, not an object of host: helper"
            )
        for host, name in helpers.items():
            if not isinstance(name, str) or not _HELPER_NAME.fullmatch(name):
                raise _config_error(path, f"credHelpers[{host[:100]!r}] must be a helper's name")
    auths = config.get("auths")
    if auths is not None:
        if not isinstance(auths, dict):
            raise _config_error(path, f"auths is a JSON {_kind(auths)}, not an object of host: entry")
        for host, entry in auths.items():
            if not isinstance(entry, dict):
                raise _config_error(path, f"auths[{host[:100]!r}] is a JSON {_kind(entry)}, not an object")
            for key in ("auth", "username", "password", "identitytoken"):
                if key in entry and not isinstance(entry[key], str):
                    raise _config_error(path, f"auths[{host[:100]!r}].{key} must be a string")
    return config


def _kind(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


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
    config = _load_config(path)
    if config is None:
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
        returncode, stdout, stderr = _run_bounded(exe, server)
    except _TooMuch as exc:
        raise HelperError(
            f"{where} printed more than the {limits.size(exc.cap)} envbuild reads from a helper "
            "(a real answer is under 8 KiB); it was stopped, and its output is not shown",
            fix=f"update or reinstall {program}; {check}",
        ) from None
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
    if returncode != 0:
        said = (stdout + b"\n" + stderr).decode("utf-8", errors="replace")
        if NOT_FOUND in said:
            return None
        raise HelperError(
            f"{where} failed (exit {returncode}); its output is not shown, it can hold the secret",
            fix=f"run `docker login {registry}` again; {check}",
        )
    try:
        answer = parse_json(stdout)
        if not isinstance(answer, dict):
            raise TypeError
        username, secret = answer["Username"], answer["Secret"]
        if not isinstance(username, str) or not isinstance(secret, str):
            raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
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


class _TooMuch(Exception):
    def __init__(self, cap: int) -> None:
        self.cap = cap


def _run_bounded(exe: str, server: str) -> tuple[int, bytes, bytes]:
    """(exit status, stdout, stderr) of `exe get` with `server` on stdin, each stream read from its
    pipe up to HELPER_OUTPUT_BYTES and the whole run bounded by HELPER_TIMEOUT_S. subprocess.run's
    capture_output buffers whatever the helper prints (2 GB exhausted memory, issue 33); here a
    helper past the cap is killed and _TooMuch raised, past the time subprocess.TimeoutExpired."""
    import selectors

    cap = limits.HELPER_OUTPUT_BYTES.get()
    deadline = time.monotonic() + HELPER_TIMEOUT_S
    process = subprocess.Popen(
        [exe, "get"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        try:
            process.stdin.write(server.encode())
            process.stdin.close()
        except BrokenPipeError:  # a helper that does not read stdin still answers
            pass
        out = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
        with selectors.DefaultSelector() as selector:
            for stream in (process.stdout, process.stderr):
                selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired([exe, "get"], HELPER_TIMEOUT_S)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    out[key.fd] += chunk
                    if len(out[key.fd]) > cap:
                        raise _TooMuch(cap)
        returncode = process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        return returncode, bytes(out[process.stdout.fileno()]), bytes(out[process.stderr.fileno()])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
