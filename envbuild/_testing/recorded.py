"""The recorded upstream of `envbuild matrix refresh`, served on 127.0.0.1 (tests and bench/).

The scenario: a copy of the bundled matrix from before a few real releases (torch 2.14.1 and 2.15.0,
jax 0.12.0.1, tensorflow 2.18.1, the nvidia/cuda 13.1.0 tag set), with one row made stale on
purpose. PyPI answers are the real ones recorded by recordings/record.py (file lists, Requires-Python,
wheel METADATA); the PyTorch indexes and the registry tag list are built in the documented formats
(PEP 691 JSON, distribution's tags/list with Link pagination and a Bearer challenge) from the
matrix's own rows and shared/research values, with a few deliberate changes.
"""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import zipfile
from pathlib import Path

from envbuild._testing.upstream import Answer, Upstream
from envbuild._util import toml
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import default_matrix_dir, load_matrix
from envbuild.refresh.cuda_images import expected_tags

FIXTURES = Path(__file__).resolve().parent / "recordings"
PADDING = 3 * 1024 * 1024  # the wheels are padded so that reading all of one would show


# --- the matrix before the releases ---------------------------------------------------------------


def _drop_version(text: str, version: str) -> str:
    new = re.sub(rf', "{re.escape(version)}"\]', "]", text, count=1)
    assert new != text, version
    return new


def _drop_block(text: str, opener: str) -> str:
    """Remove the [[...]] block that starts with `opener` up to the next top-level [[ or the end."""
    start = text.index(opener)
    following = text.find("\n[[", start + len(opener))
    nested = text.find("\n  [[", start + len(opener))
    while following != -1 and following == nested:  # skip [[release.variant]] (indented) blocks
        following = text.find("\n[[", following + 1)
    return text[:start] + (text[following + 1 :] if following != -1 else "")


def make_stale_matrix(parent: Path) -> Path:
    root = parent / "matrix"
    shutil.copytree(default_matrix_dir(), root)
    # requirements.toml has rows for the builds dropped below, which `matrix check` would refuse; with
    # no file every build is "not measured", which the framework-row refresh does not read anyway
    (root / "requirements.toml").unlink(missing_ok=True)
    torch = root / "frameworks" / "torch.toml"
    text = _drop_block(torch.read_text(), '[[release]]\nversions = ["2.15.0"]')
    torch.write_text(_drop_version(text, "2.14.1"))
    jax = root / "frameworks" / "jax.toml"
    jax.write_text(_drop_version(jax.read_text(), "0.12.0.1"))
    tensorflow = root / "frameworks" / "tensorflow.toml"
    text = _drop_version(tensorflow.read_text(), "2.18.1")
    row = text.index('versions = ["2.18.0"]')  # the stale row: its NCCL pin differs from PyPI's
    text = text[:row] + text[row:].replace('nccl = "2.21.5"', 'nccl = "2.21.4"', 1)
    tensorflow.write_text(text)
    cuda = root / "cuda.toml"
    cuda.write_text(_drop_block(cuda.read_text(), '[[image]]\ncuda = "13.1.0"'))
    assert check_matrix(load_matrix(root)) == []
    return root


# --- the recorded upstream ------------------------------------------------------------------------


def wheel_bytes(filename: str, metadata: str) -> bytes:
    """A wheel holding the recorded METADATA after PADDING bytes of incompressible data."""
    dist = "-".join(filename.split("-")[:2])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as wheel:
        wheel.writestr(f"{dist.split('-')[0]}/_payload.bin", random.Random(filename).randbytes(PADDING))
        wheel.writestr(f"{dist}.dist-info/METADATA", metadata)
        wheel.writestr(f"{dist}.dist-info/RECORD", "")
    return buffer.getvalue()


def serve_pypi(upstream: Upstream, *, ranges: bool = True) -> None:
    for path in (FIXTURES / "pypi").glob("*.json"):
        upstream.add(f"/pypi/{path.stem}/json", Answer(path.read_bytes()))
    for path in (FIXTURES / "metadata").glob("*.METADATA"):
        filename = path.name[: -len(".METADATA")]
        body = wheel_bytes(filename, path.read_text())
        upstream.add(
            f"/files/{filename}", Answer(body, content_type="application/octet-stream", ranges=ranges)
        )


def pep691(files: list[str]) -> Answer:
    body = {
        "meta": {"api-version": "1.1"},
        "name": "torch",
        "files": [{"filename": f, "url": f"../../files/{f}", "hashes": {}} for f in files],
    }
    return Answer(json.dumps(body).encode(), content_type="application/vnd.pypi.simple.v1+json")


def serve_pytorch_index(upstream: Upstream) -> None:
    """cu126/cu130/cu132 as the matrix rows say, except that cu126 lacks 2.13.0, plus a cu134 index
    (CUDA 13.4 has no known driver floor)."""
    published = {
        "cu126": ["2.14.0", "2.14.1"],
        "cu130": ["2.13.0", "2.14.0", "2.14.1"],
        "cu132": ["2.13.0", "2.14.0", "2.14.1"],
        "cu134": ["2.14.0"],
    }
    for name, versions in published.items():
        files = [
            f"torch-{v}+{name}-cp{py}-cp{py}-manylinux_2_28_x86_64.whl"
            for v in versions
            for py in ("311", "312")
        ]
        upstream.add(f"/whl/{name}/torch/", pep691(files))


def cuda_tags(matrix_root: Path) -> list[str]:
    """Every tag of the stale matrix's rows, except all of 12.4.1 and the cm2 ones of 12.6.3, plus
    13.1.0 (its OS list from shared/research), 13.4.0 and an old 12.4.0 point release."""
    rows = toml.loads((matrix_root / "cuda.toml").read_text())["image"]
    tags: set[str] = set()
    for row in rows:
        if row["cuda"] == "12.4.1":
            continue
        tags |= {t for t in expected_tags(row) if not (row["cuda"] == "12.6.3" and t.endswith("-cm2"))}
    for os_name in (
        "amzn2023",
        "azl3",
        "oraclelinux8",
        "oraclelinux9",
        "rockylinux8",
        "rockylinux9",
        "rockylinux10",
        "ubi8",
        "ubi9",
        "ubi10",
        "ubuntu22.04",
        "ubuntu24.04",
    ):
        tags |= {f"13.1.0-{kind}-{os_name}" for kind in ("base", "runtime", "devel")}
    tags |= {"13.4.0-base-ubuntu24.04", "13.4.0-runtime-ubuntu24.04", "12.4.0-runtime-ubuntu22.04"}
    return sorted(tags)


def serve_tags(upstream: Upstream, tags: list[str]) -> None:
    half = len(tags) // 2
    first, second = tags[:half], tags[half:]
    link = f'</v2/nvidia/cuda/tags/list?n=1000&last={first[-1]}>; rel="next"'
    upstream.add(
        "/v2/nvidia/cuda/tags/list?n=1000",
        Answer(json.dumps({"name": "nvidia/cuda", "tags": first}).encode(), headers={"Link": link}),
    )
    upstream.add(
        f"/v2/nvidia/cuda/tags/list?n=1000&last={first[-1]}",
        Answer(json.dumps({"name": "nvidia/cuda", "tags": second}).encode()),
    )


def serve_everything(server: Upstream, matrix_root: Path) -> None:
    serve_pypi(server)
    serve_pytorch_index(server)
    serve_tags(server, cuda_tags(matrix_root))
