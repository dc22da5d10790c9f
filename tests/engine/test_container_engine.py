"""envbuild.engine on the real Docker Engine: the answers the stages build on (inspect, id, a
missing image as None, a refused reference as a 400, the version)."""

from __future__ import annotations

import uuid

import pytest

from envbuild.engine import current_engine
from envbuild.engine.base import EngineError
from tests.helpers.docker import docker

pytestmark = pytest.mark.docker


def test_inspect_and_id_of_an_image_the_engine_has(bookworm_image: str) -> None:
    engine = current_engine()
    attrs = engine.inspect_image(bookworm_image)
    assert attrs is not None
    cli_id = docker("image", "inspect", "--format", "{{.Id}}", bookworm_image).stdout.strip()
    assert attrs["Id"] == cli_id == engine.image_id(bookworm_image)
    assert attrs["Os"] == "linux"


def test_an_image_the_engine_lacks_is_none_not_an_error() -> None:
    missing = f"envbuild-test/missing-{uuid.uuid4().hex[:8]}:latest"
    assert current_engine().inspect_image(missing) is None
    assert current_engine().image_id(missing) is None


def test_a_reference_the_engine_refuses_keeps_its_status() -> None:
    with pytest.raises(EngineError) as raised:
        current_engine().inspect_image("Not/A-Valid:Reference:At:All")
    assert raised.value.status == 400 and raised.value.fix


def test_version_and_remove_tags(bookworm_image: str) -> None:
    engine = current_engine()
    version = engine.version()
    assert version and version == docker("version", "--format", "{{.Server.Version}}").stdout.strip()
    tag = f"envbuild-test/untag-{uuid.uuid4().hex[:8]}:x"
    docker("tag", bookworm_image, tag)
    engine.remove_tags([tag, tag + "-never-made"])
    assert engine.inspect_image(tag) is None
    assert engine.inspect_image(bookworm_image) is not None  # the image stays: only the tag went
