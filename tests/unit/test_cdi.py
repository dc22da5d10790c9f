"""CDI specs (issue 37, the GPU-path part): the parser against the spec NVIDIA's own test expects
`nvidia-ctk cdi generate` to write (tests/fixtures/cdi/SOURCES.md), `auto`'s choice, and doctor's
report of the specs, the legacy hook and the path verify would take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.engine import cdi
from envbuild.host.gpuaccess import check_gpu_access

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"


def test_the_nvidia_ctk_spec_is_read_for_its_kind_and_devices() -> None:
    spec = cdi.read_spec(str(FIXTURES / "nvidia" / "nvidia.yaml"))
    assert (spec.kind, spec.devices, spec.problem) == ("nvidia.com/gpu", ("0", "all"), None)
    other = cdi.read_spec(str(FIXTURES / "example-vendor" / "example.yaml"))
    assert (other.kind, other.devices) == ("example.com/device", ("0", "all"))


def test_the_flow_and_json_layouts_other_writers_use(tmp_path: Path) -> None:
    (tmp_path / "operator.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits: {}\n"
        "- name: all  # every GPU\n  containerEdits: {}\ncontainerEdits: {}\n"
    )
    (tmp_path / "dra.json").write_text(
        json.dumps({"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [{"name": "GPU-1"}]})
    )
    (tmp_path / "notes.txt").write_text("kind: nvidia.com/gpu\n")  # not a spec file name
    specs = cdi.find_specs((str(tmp_path),))
    assert [(Path(s.path).name, s.devices) for s in specs] == [
        ("dra.json", ("GPU-1",)),
        ("operator.yaml", ("0", "all")),
    ]
    assert cdi.gpu_devices(specs) == ["GPU-1", "0", "all"]


def test_a_file_that_is_not_a_spec_or_too_big_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "plain.yaml").write_text("hello: world\n")
    (tmp_path / "huge.yaml").write_bytes(b"#" * (cdi.MAX_SPEC_BYTES + 1))
    problems = {Path(s.path).name: s.problem for s in cdi.find_specs((str(tmp_path),))}
    assert problems["broken.json"].startswith("is not JSON")
    assert problems["plain.yaml"] == "names no kind: not a CDI spec"
    assert problems["huge.yaml"] == f"is over {cdi.MAX_SPEC_BYTES} bytes"


@pytest.mark.parametrize(
    ("directory", "access", "path"),
    [
        ("nvidia", "auto", "cdi"),
        ("example-vendor", "auto", "legacy"),  # another vendor's class is not a GPU path
        ("empty", "auto", "legacy"),
        ("nvidia", "legacy", "legacy"),
        ("nvidia", "cdi", "cdi"),
        ("empty", "cdi", None),  # the caller fails with cdi.NO_SPEC
        ("example-vendor", "cdi", None),
    ],
)
def test_the_gpu_path(directory: str, access: str, path) -> None:
    assert cdi.gpu_path(access, cdi.find_specs((str(FIXTURES / directory),))) == path


def test_the_no_spec_message_is_the_one_users_are_told() -> None:
    assert cdi.NO_SPEC == (
        "no CDI device nvidia.com/gpu on this host: generate one with "
        "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
    )


def test_doctor_lists_the_specs_and_says_which_path_verify_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cdi.DIRS_VAR, f"{FIXTURES / 'example-vendor'}:{FIXTURES / 'nvidia'}")
    checks = {check.name: check for check in check_gpu_access()}
    assert checks["CDI specs"].status == "ok"
    assert "nvidia.yaml: nvidia.com/gpu (0, all)" in checks["CDI specs"].evidence
    assert "example.yaml: example.com/device (0, all)" in checks["CDI specs"].evidence
    assert checks["GPU path"].evidence.startswith("verify --gpu-access auto would use cdi")


def test_doctor_without_a_spec_says_how_to_make_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cdi.DIRS_VAR, str(FIXTURES / "empty"))
    monkeypatch.setenv("PATH", str(FIXTURES))  # no legacy hook either
    checks = {check.name: check for check in check_gpu_access()}
    assert checks["CDI specs"].status == "warn" and "nvidia-ctk cdi generate" in checks["CDI specs"].fix
    assert checks["legacy toolkit hook"].status == "warn"
    assert checks["GPU path"].status == "warn" and "would use legacy" in checks["GPU path"].evidence
