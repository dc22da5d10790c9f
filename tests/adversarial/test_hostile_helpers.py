"""Issue 33, hostile docker credential helpers and docker config files: `envbuild audit` of an image
on a loopback registry that asks for a login, with a `docker-credential-*` script written by the test
on PATH that answers 2 GB, broken JSON or JSON nested 100,000 deep, and config.json files whose keys
have the wrong shape. Each run is the real CLI in a subprocess under an address-space rlimit: a clear
error naming the helper (or the config key) and the registry, exit 1, no traceback, the helper's
output never quoted, and nothing left behind but what the test wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.registry import LoopbackServer, RegistryHandler

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-token-9f2c"
DIGEST = "sha256:" + "ab" * 32
# the envbuild process may map this much: a helper's 2 GB buffered whole would not fit
MEMORY_LIMIT = 1 << 30


class LoginRegistry(RegistryHandler):
    """Every request wants HTTP basic credentials, so the client asks the docker config for them."""

    def do_GET(self) -> None:
        self.reply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', 'Basic realm="envbuild-test"')

    do_HEAD = do_GET


@pytest.fixture
def registry() -> Iterator[LoopbackServer]:
    with LoopbackServer(LoginRegistry) as server:
        yield server


def helper(directory: Path, name: str, body: str) -> None:
    """docker-credential-`name`: a shell script that reads the server URL and runs `body`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"docker-credential-{name}"
    path.write_text(f"#!/bin/sh\nread -r server\n{body}\n")
    path.chmod(0o755)


def run_audit(tmp_path: Path, host: str, config: dict | str) -> tuple[int, str]:
    """`envbuild audit HOST/team/app@sha256:...` with `config` as config.json and tmp/bin first on
    PATH, in a subprocess limited to MEMORY_LIMIT of address space; (exit code, stdout + stderr)."""
    docker = tmp_path / "docker"
    docker.mkdir(exist_ok=True)
    (docker / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "DOCKER_CONFIG": str(docker),
        "ENVBUILD_CACHE_DIR": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "home"),
    }
    limit = (
        "import resource, runpy, sys; "
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT})); "
        "sys.argv = ['envbuild', *sys.argv[1:]]; runpy.run_module('envbuild', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", limit, "audit", f"{host}/team/app@{DIGEST}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def refused(code: int, text: str, *wanted: str) -> None:
    assert code == 1, text
    for part in wanted:
        assert part in text, text
    assert "Traceback" not in text and "internal error" not in text.lower() and "bug" not in text.lower()
    assert SECRET not in text and "\0" not in text


def left_behind(tmp_path: Path) -> set[str]:
    """Every file under tmp_path but the parsed-matrix cache, which any command writes."""
    found = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    return {name for name in found if not name.startswith("cache/matrix-")}


WROTE = {"docker/config.json"}


def test_a_helper_that_prints_2_gb_is_stopped_at_the_cap(tmp_path: Path, registry: LoopbackServer) -> None:
    helper(tmp_path / "bin", "flood", "head -c 2000000000 /dev/zero")
    code, text = run_audit(tmp_path, registry.host, {"credHelpers": {registry.host: "flood"}})
    refused(code, text, "docker-credential-flood", registry.host, "printed more than the 1 MiB")
    assert left_behind(tmp_path) == WROTE | {"bin/docker-credential-flood"}


def test_a_helper_that_floods_stderr_and_fails_is_stopped_too(
    tmp_path: Path, registry: LoopbackServer
) -> None:
    helper(tmp_path / "bin", "noisy", f"echo {SECRET} >&2; head -c 2000000000 /dev/zero >&2; exit 3")
    code, text = run_audit(tmp_path, registry.host, {"credsStore": "noisy"})
    refused(code, text, "docker-credential-noisy", registry.host, "printed more than")


@pytest.mark.parametrize(
    "answer",
    [
        f'{{"ServerURL": "x", "Username": "u", "Secret": "{SECRET}"',  # cut short
        "[" * 100_000 + "]" * 100_000,  # nested past any parser's recursion
        '{"Username": ' * 50_000 + '"u"' + "}" * 50_000,
        f'["{SECRET}"]',  # JSON, but not the object
        f'{{"Username": 5, "Secret": "{SECRET}"}}',
    ],
    ids=["cut-short", "nested-arrays", "nested-objects", "array", "number-username"],
)
def test_a_helper_answer_that_is_not_the_protocols_object_is_a_clear_error(
    tmp_path: Path, registry: LoopbackServer, answer: str
) -> None:
    (tmp_path / "answer").write_text(answer)
    helper(tmp_path / "bin", "garbled", f"cat {tmp_path / 'answer'}")
    code, text = run_audit(tmp_path, registry.host, {"credHelpers": {registry.host: "garbled"}})
    refused(code, text, "docker-credential-garbled", registry.host, "answered something other than the JSON")


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"auths": 5}, "auths is a JSON number"),
        ({"credHelpers": []}, "credHelpers is a JSON array"),
        ({"auths": {"HOST": "dXNlcjpwYXNz"}}, "auths['HOST'] is a JSON string"),
        ({"auths": {"HOST": {"auth": 5}}}, "auths['HOST'].auth must be a string"),
        ({"credHelpers": {"HOST": "../../bin/sh"}}, "credHelpers['HOST'] must be a helper's name"),
        ({"credsStore": ["desktop"]}, "credsStore must be a helper's name"),
        ([1, 2], "is a JSON list, not an object"),
        ("[" * 100_000 + "]" * 100_000, "is not JSON"),
        ('{"auths": {', "is not JSON"),
    ],
    ids=[
        "auths-number",
        "helpers-array",
        "entry-string",
        "auth-number",
        "helper-path",
        "store-list",
        "top-array",
        "nested",
        "cut-short",
    ],
)
def test_a_docker_config_of_the_wrong_shape_is_a_clear_error(
    tmp_path: Path, registry: LoopbackServer, config: object, names: str
) -> None:
    shown = config if isinstance(config, str) else json.dumps(config).replace("HOST", registry.host)
    code, text = run_audit(tmp_path, registry.host, shown)
    refused(code, text, str(tmp_path / "docker" / "config.json"), names.replace("HOST", registry.host))
    assert left_behind(tmp_path) == WROTE
