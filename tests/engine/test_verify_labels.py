"""`envbuild verify IMAGE` smokes an image with the [smoke] settings it was rendered for (issue 32, item
4): before, an image whose spec said `precision = "bf16"` was smoked in fp32 (and on a GPU, whatever
the spec's device) wherever it was verified without the spec at hand.

The image is TORCH_SPEC with its own [smoke] table, rendered and built for real (the Engine's cache
shares every layer but the last LABEL with the session's torch image). The labels are read from the
Engine, and from the registry for a pushed digest.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.image.imagelabels import image_labels
from envbuild.oci.labels import spec_smoke_label
from envbuild.oci.registry import resolve_digest
from tests.helpers.docker import TORCH_SPEC, docker, render_and_build

pytestmark = pytest.mark.docker

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
IMAGE = f"envbuild-test/verify-labels:bf16-{WORKER}"
BAD_IMAGE = f"envbuild-test/verify-labels:bad-{WORKER}"
REGISTRY = os.environ.get("ENVBUILD_TEST_REGISTRY") or "127.0.0.1:5000"
# TORCH_SPEC says device = "cpu"; these are the settings the image must carry
BF16_SPEC = TORCH_SPEC.replace(
    '[smoke]\ndevice = "cpu"\n', '[smoke]\ndevice = "cpu"\nsteps = 3\nprecision = "bf16"\ntimeout = 300\n'
)


@pytest.fixture(scope="module")
def bf16_image(
    tmp_path_factory: pytest.TempPathFactory, bookworm_image: str, wheelhouse: Path
) -> Iterator[str]:
    assert 'precision = "bf16"' in BF16_SPEC
    render_and_build(tmp_path_factory.mktemp("bf16-image"), BF16_SPEC, wheelhouse, bookworm_image, IMAGE)
    yield IMAGE
    docker("rmi", "-f", IMAGE, check=False)


def verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, image: str, *flags: str
) -> tuple[int, dict, dict, str]:
    """(exit code, the --report file's report, the --record file, stderr) of `envbuild verify`."""
    report, record = tmp_path / "smoke.json", tmp_path / "record.json"
    code = main(["verify", image, *flags, "--report", str(report), "--record", str(record)])
    err = capsys.readouterr().err
    return code, json.loads(report.read_text())["report"], json.loads(record.read_text()), err


def test_verify_smokes_with_the_settings_the_image_was_rendered_for(
    bf16_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, record, err = verify(capsys, tmp_path, bf16_image)
    assert code == 0, err
    # no flag: bf16, three steps and the CPU, as the spec said (the GPU default would fail on this host)
    assert (report["precision"], report["steps"], report["device_used"]) == ("bf16", 3, "cpu")
    assert record["device"] == "cpu"
    assert record["settings"] == {
        "device": {"value": "cpu", "from": "label"},
        "steps": {"value": 3, "from": "label"},
        "precision": {"value": "bf16", "from": "label"},
        "timeout": {"value": 300, "from": "label"},
    }
    assert "verify: smoke settings: device cpu (label), steps 3 (label), precision bf16 (label)" in err


def test_a_flag_overrides_the_image_label(
    bf16_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, record, err = verify(capsys, tmp_path, bf16_image, "--precision", "fp32", "--steps", "2")
    assert code == 0, err
    assert (report["precision"], report["steps"]) == ("fp32", 2)
    assert record["settings"]["precision"] == {"value": "fp32", "from": "flag"}
    assert record["settings"]["device"] == {"value": "cpu", "from": "label"}
    assert "precision fp32 (flag; the image says 'bf16')" in err


def test_invalid_labels_are_the_defaults_with_a_warning_naming_each(
    bf16_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # anyone can put labels on an image: a layer of labels the spec's rules refuse, over the real one
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {bf16_image}\n"
        f'LABEL "{spec_smoke_label("precision")}"="fp64" "{spec_smoke_label("timeout")}"="5"\n'
    )
    built = docker("build", "-q", "-t", BAD_IMAGE, str(context), check=False)
    assert built.returncode == 0, built.stderr
    try:
        code, report, record, err = verify(capsys, tmp_path, BAD_IMAGE, "--steps", "2")
    finally:
        docker("rmi", "-f", BAD_IMAGE, check=False)
    assert code == 0, err
    assert report["precision"] == "fp32"  # the default, not the label's fp64
    assert record["settings"]["precision"] == {"value": "fp32", "from": "default"}
    assert record["settings"]["timeout"] == {"value": 600, "from": "default"}
    assert record["settings"]["device"] == {"value": "cpu", "from": "label"}  # the valid one is kept
    assert f"ignoring the label {spec_smoke_label('precision')}='fp64': accepted: fp32, fp16, bf16" in err
    assert (
        f"ignoring the label {spec_smoke_label('timeout')}='5': expected a whole number from 10 to 86400"
        in err
    )


def test_the_labels_of_a_pushed_digest_are_read_from_its_registry(bf16_image: str) -> None:
    # the HPC runtimes fetch by digest with no Engine to ask: the registry's config says the same
    repository = f"{REGISTRY}/envbuild-test/verify-labels-{uuid.uuid4().hex[:8]}"
    docker("tag", bf16_image, f"{repository}:bf16")
    try:
        docker("push", "-q", f"{repository}:bf16")
        ref = f"{repository}@{resolve_digest(f'{repository}:bf16')}"
        labels = image_labels(ref, runtime="apptainer")
    finally:
        docker("rmi", f"{repository}:bf16", check=False)
    assert {key: labels[spec_smoke_label(key)] for key in ("device", "steps", "precision", "timeout")} == {
        "device": "cpu",
        "steps": "3",
        "precision": "bf16",
        "timeout": "300",
    }


def test_verify_gpu_audits_the_framework_the_image_label_names(
    bf16_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `envbuild build`'s gate judges the plan's framework: verify's, from io.envbuild.framework
    code, _, _, err = verify(capsys, tmp_path, bf16_image, "--gpu", "H100", "--steps", "2")
    assert code == 0, err
    assert "audit: sm_90 (H100): no verdict" in err
    assert "audit: warning: no device code in torch's libraries: a CPU build, so no GPU gets a verdict" in err
