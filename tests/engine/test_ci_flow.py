"""The scale-out pipeline on real services: a candidate pushed to the registry on 127.0.0.1, verified by
digest (pulled, since it is not local) with the CPU smoke step, promoted inside the registry, and an
unverified digest refused.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.oci.registry import resolve_digest
from tests.helpers.docker import docker
from tests.helpers.registry import manifest_digest, push

pytestmark = pytest.mark.docker


@pytest.fixture
def candidates(tmp_path: Path, torch_image: str, anonymous_registry: str):
    """Two candidates in the registry, built from the session's torch image: (ref@digest, ref@digest)."""
    refs, made = [], []
    for name in ("candidate", "unverified"):
        context = tmp_path / name
        context.mkdir()
        marker = uuid.uuid4().hex[:12]  # a fresh config, so a fresh digest every run
        (context / "Dockerfile").write_text(f'FROM {torch_image}\nLABEL envbuild.test.run="{marker}"\n')
        tag = f"{anonymous_registry}/envbuild-test/ci-flow:{name}-{marker}"
        docker("build", "-q", "-t", tag, str(context))
        push(tag)
        repository, reference = tag.rsplit(":", 1)
        digest = manifest_digest(anonymous_registry, "envbuild-test/ci-flow", reference)
        docker("rmi", tag)  # not local any more: verify must pull it by digest
        refs.append(f"{repository}@{digest}")
        made.append(f"{repository}@{digest}")
    yield refs
    for ref in made:
        docker("rmi", "-f", ref, check=False)


def test_verify_by_digest_then_promote_in_the_registry(
    candidates, tmp_path: Path, anonymous_registry: str, capsys
) -> None:
    candidate, unverified = candidates
    report = tmp_path / "smoke.json"
    code = main(["verify", candidate, "--smoke-device", "cpu", "--steps", "5", "--report", str(report)])
    capsys.readouterr()
    assert code == 0
    saved = json.loads(report.read_text())
    assert saved["report"]["passed"] is True and saved["image"].startswith("sha256:")

    final = f"release-{uuid.uuid4().hex[:8]}"
    assert main(["promote", candidate, "--to", final, "--report", str(report)]) == 0
    out = capsys.readouterr().out
    digest = candidate.split("@", 1)[1]
    assert f":{final}@{digest}" in out
    assert resolve_digest(f"{anonymous_registry}/envbuild-test/ci-flow:{final}") == digest

    # a digest nobody verified is refused, and so is a report made for another image
    assert main(["promote", unverified, "--to", "nope"]) == 1
    assert "was not verified by envbuild" in capsys.readouterr().err
    assert main(["promote", unverified, "--to", "nope", "--report", str(report)]) == 1
    assert "was made for" in capsys.readouterr().err
