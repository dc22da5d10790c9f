"""Checks on generated CI files: the real schema checks (check-jsonschema's vendored GitHub workflow
and GitLab CI schemas, no network) and a YAML 1.2 reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def check_workflow(path: Path, schema: str = "vendor.github-workflows") -> subprocess.CompletedProcess:
    closed = "http://127.0.0.1:9"  # nothing listens there: a schema download would fail
    env = {**os.environ, "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "http_proxy": closed}
    env.update({"https_proxy": closed, "NO_PROXY": "", "no_proxy": ""})
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def check_gitlab_ci(path: Path) -> subprocess.CompletedProcess:
    return check_workflow(path, "vendor.gitlab-ci")


def yaml_load(text: str):
    return YAML(typ="safe", pure=True).load(text)


def yaml_dump(value: object, path: Path) -> None:
    YAML(typ="safe", pure=True).dump(value, path)


# What the tests' workflows install envbuild from: envbuild is not on PyPI, so `ci github` and
# `ci gitlab` need an --install unless the running envbuild came from somewhere a runner can reach.
INSTALL = "git+https://github.com/acme/envbuild@v0.1.0"
