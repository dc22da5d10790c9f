"""`envbuild audit IMAGE` reports a CUDA library present more than once (issue 32, item 5), on a real
image read through the Engine: an nvidia/cuda-like copy of the CUDA runtime in one layer, the
nvidia-cuda-runtime wheel's copy in the next (torch's site-packages beside it), a third copy a later
layer deletes and a hard link, which are no copies. The bytes come from the layers' files as the audit
extracts them, and a second audit answered from the audit cache reports the same.

The "libraries" are a real ELF object without device code (this Python's binary) under the CUDA
runtime's file names: the report goes by names and sizes, so no CUDA download is needed here; the
real torch 2.6.0 cu124 image's lists are tests/fixtures/audit/duplicates.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from envbuild.cli.app import main
from tests.helpers.audit import plain_elf
from tests.helpers.docker import docker, exports_while

pytestmark = [pytest.mark.docker]

SITE = "opt/venv/lib/python3.11/site-packages"
SYSTEM = "usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127"
WHEEL = f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12"


@pytest.mark.parametrize("read", ["storage", "save"])
def test_two_copies_of_the_cuda_runtime_are_reported_with_their_bytes(
    bookworm_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    read: str,
) -> None:
    """Both ways an audit reads a local image's new layers: the Engine's overlay2 directories (no
    export), and `docker save` (ENVBUILD_AUDIT_READ=save)."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    if read == "save":
        monkeypatch.setenv("ENVBUILD_AUDIT_READ", "save")
    context = tmp_path / "context"
    size = plain_elf(context / "lib.so").stat().st_size
    tag = f"envbuild-test/audit-duplicates:{uuid.uuid4().hex[:12]}"
    (context / "Dockerfile").write_text(
        f"FROM {bookworm_image}\n"
        f"COPY lib.so /{SYSTEM}\n"  # the base image's copy
        f"COPY lib.so /{WHEEL}\n"  # the wheel's
        f"COPY lib.so /{SITE}/torch/lib/libtorch_cuda.so\n"
        "COPY lib.so /opt/old/libcudart.so.12\n"
        f"RUN rm /opt/old/libcudart.so.12 && ln /{WHEEL} /{WHEEL}.4\n"  # deleted; a hard link
    )
    try:
        docker("build", "-q", "-t", tag, str(context))
        image_id = docker("image", "inspect", tag, "--format", "{{.Id}}").stdout.strip()

        def audit() -> tuple[int, dict]:
            code = main(["audit", tag, "--framework", "torch", "--json"])
            return code, json.loads(capsys.readouterr().out)

        (code, first), exported = exports_while(audit, image_id)
        assert code == 0 and exported == ([image_id] if read == "save" else []) and first["ok"] is True
        (duplicate,) = first["duplicates"]
        assert duplicate["library"] == "libcudart" and duplicate["component"] == "CUDA runtime"
        assert [(c["path"], c["bytes"], c["version"], c["loaded"]) for c in duplicate["copies"]] == [
            (WHEEL, size, "12", True),
            (SYSTEM, size, "12.4.127", False),
        ]
        assert duplicate["wasted_bytes"] == size == first["duplicate_bytes"]

        (code, second), exported = exports_while(audit, image_id)
        assert exported == [] and (code, second) == (0, first)  # the cache kept the bytes
        capsys.readouterr()
        assert main(["audit", tag, "--framework", "torch"]) == 0
        text = capsys.readouterr().out
        assert "warning: 1 CUDA library is present more than once (libcudart x2)" in text
        assert f"    loaded {WHEEL}  12  " in text
    finally:
        docker("rmi", "-f", tag, check=False)
