"""Promotion's refusal of an unverified image without dockerd (issue 23, item 5): `envbuild promote
REF --to TAG` against a registry on loopback holding one image (tests/helpers/registry.py's
OneImageRegistry). The request log proves the refusal: a refused promotion writes no manifest.
Report files are real captured smoke reports (tests/fixtures/smoke/), tied to the registry's image id
the way `envbuild verify --report` ties them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import EnvbuildError, PromoteError
from envbuild.image.promote import promote_in_registry
from envbuild.image.verify import report_digest, report_document
from envbuild.oci.labels import VERIFIED
from envbuild.oci.registry import promote_by_digest
from tests.helpers.paths import FIXTURES
from tests.helpers.registry import OneImageRegistry

PASSED = json.loads((FIXTURES / "smoke" / "torch-cpu-passed.json").read_text())
FAILED = json.loads((FIXTURES / "smoke" / "torch-cpu-lr0-failed.json").read_text())
NOT_VERIFIED = "was not verified by envbuild (no io.envbuild.verified label): refusing to promote"


@pytest.fixture
def registry(request: pytest.FixtureRequest) -> Iterator[OneImageRegistry]:
    """The one-image registry; its image's labels come from the test's `labels` parameter."""
    with OneImageRegistry(getattr(request, "param", None)) as server:
        yield server


def report_file(path: Path, report: dict, image_id: str) -> str:
    document = report_document(image_id, "cpu", report)
    path.write_text(json.dumps({**document, "report-digest": report_digest(document)}))
    return str(path)


def test_an_image_without_the_verified_label_is_refused_and_no_tag_is_written(
    registry: OneImageRegistry,
) -> None:
    with pytest.raises(EnvbuildError) as raised:
        promote_by_digest(registry.ref, ["v1"])
    assert raised.value.message == f"{registry.ref} {NOT_VERIFIED}"
    assert "envbuild verify" in raised.value.fix
    assert registry.puts == []
    assert ("GET", f"/v2/x/y/blobs/{registry.config_digest}") in registry.seen  # it read the labels


@pytest.mark.parametrize(
    "registry", [{VERIFIED: "false"}, {VERIFIED: "True "}, {"verified": "true"}], indirect=True
)
def test_only_the_exact_verified_label_counts(registry: OneImageRegistry) -> None:
    with pytest.raises(EnvbuildError, match="refusing to promote"):
        promote_by_digest(registry.ref, ["v1"])
    assert registry.puts == []


@pytest.mark.parametrize("registry", [{VERIFIED: "true"}], indirect=True)
def test_a_verified_image_gets_the_tag_with_its_own_manifest_bytes(registry: OneImageRegistry) -> None:
    promoted = promote_by_digest(registry.ref, ["v1"])
    assert promoted == [(f"{registry.host}/x/y:v1", registry.digest)]
    assert registry.puts == [("/v2/x/y/manifests/v1", registry.manifest)]


def test_the_command_line_refuses_with_exit_1(registry: OneImageRegistry, capsys) -> None:
    assert main(["promote", registry.ref, "--to", "v1"]) == 1
    err = capsys.readouterr().err
    assert NOT_VERIFIED in err and "internal error" not in err
    assert registry.puts == []


def test_a_failed_report_for_the_image_is_refused(registry: OneImageRegistry, tmp_path: Path) -> None:
    path = report_file(tmp_path / "smoke.json", FAILED, registry.config_digest)
    with pytest.raises(PromoteError) as raised:
        promote_in_registry(registry.ref, ["v1"], report_path=path)
    assert "does not show a passing smoke step: report.passed: the smoke step failed" in raised.value.message
    assert registry.puts == []


def test_a_passing_report_made_for_another_image_is_refused(
    registry: OneImageRegistry, tmp_path: Path
) -> None:
    path = report_file(tmp_path / "smoke.json", PASSED, "sha256:" + "9" * 64)
    with pytest.raises(PromoteError, match="was made for sha256:999999999999, not for"):
        promote_in_registry(registry.ref, ["v1"], report_path=path)
    assert registry.puts == []


def test_a_passing_report_for_the_image_vouches_for_it(registry: OneImageRegistry, tmp_path: Path) -> None:
    """The report stands in for the label (`promote --to --report`): the same image, unlabelled, goes."""
    path = report_file(tmp_path / "smoke.json", PASSED, registry.config_digest)
    assert promote_in_registry(registry.ref, ["v1"], report_path=path) == [
        (f"{registry.host}/x/y:v1", registry.digest)
    ]
    assert registry.puts == [("/v2/x/y/manifests/v1", registry.manifest)]
