"""`envbuild matrix refresh --audit` on the real jax-cuda12-plugin 0.10.2 wheel (issue 16, item 4).

(a) The kernel libraries read from PyPI by range requests are byte for byte the members of the whole
    wheel, list the same kernels, and cost a fraction of the wheel's bytes.
(b) The issue's row (sm_50,...,sm_100,compute_120 for 0.10.2, unconfirmed) is corrected by
    `--audit jax --write` to what the wheel carries, with the wheel's URL and sha256 as arch_source,
    and resolve then reports the measured row without an arch caveat. The wheel and PyPI's answer
    for it are served on 127.0.0.1, so the run reads exactly the bytes PyPI served.

The wheel (8 MB) is downloaded once per session. Needs https://pypi.org: skips without it, and fails
under ENVBUILD_REQUIRE_DOCKER=1 (CI).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from envbuild._testing.upstream import Answer, Upstream
from envbuild.audit.kernels import read_kernels
from envbuild.cli.app import main
from envbuild.errors import EnvbuildError
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import load_matrix
from envbuild.refresh.arch_audit import kernel_member
from envbuild.refresh.members import read_members
from envbuild.refresh.upstream import RANGE_BLOCK, DistFile, Http, pypi_releases
from tests.helpers.minimatrix import write_minimatrix
from tests.helpers.pypi import pypi_unreachable

pytestmark = pytest.mark.pypi

PROJECT, VERSION = "jax-cuda12-plugin", "0.10.2"
MEASURED = "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,sm_101,sm_120,compute_120"  # the issue's cuobjdump listing
ROW_ARCH = "sm_50,sm_60,sm_70,sm_80,sm_90,sm_100,compute_120"  # what the matrix row said


@pytest.fixture(scope="session")
def pypi_wheel() -> DistFile:
    try:
        files = pypi_releases(Http(timeout=60), "https://pypi.org", PROJECT)[VERSION]
    except EnvbuildError as exc:
        pypi_unreachable(exc.message)
    return next(f for f in files if "-cp311-cp311-manylinux" in f.filename)


@pytest.fixture(scope="session")
def whole_wheel(pypi_wheel: DistFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel downloaded whole, once, checked against PyPI's sha256."""
    import requests

    try:
        body = requests.get(pypi_wheel.url, timeout=120).content
    except requests.RequestException as exc:
        pypi_unreachable(str(exc))
    assert hashlib.sha256(body).hexdigest() == pypi_wheel.sha256
    path = tmp_path_factory.mktemp("wheel") / pypi_wheel.filename
    path.write_bytes(body)
    return path


def test_range_read_members_equal_the_whole_wheels(
    pypi_wheel: DistFile, whole_wheel: Path, tmp_path: Path
) -> None:
    http = Http(timeout=60)
    try:
        read = read_members(http, pypi_wheel.url, lambda n: kernel_member("jax", n), str(tmp_path))
    except EnvbuildError as exc:
        pypi_unreachable(exc.message)
    assert read.ranged
    with zipfile.ZipFile(whole_wheel) as archive:
        expected = [n for n in archive.namelist() if kernel_member("jax", n)]
        assert list(read.paths) == expected and len(expected) == 11
        for name in expected:
            assert (tmp_path / name).read_bytes() == archive.read(name), name
            archive.extract(name, tmp_path / "whole")
            assert read_kernels(str(tmp_path / name)) == read_kernels(str(tmp_path / "whole" / name))
    assert read_kernels(str(tmp_path / "jax_cuda12_plugin/_linalg.so")).sass[-2:] == ("sm_101", "sm_120")
    # the plugin's wheel is almost all kernel libraries: reading them all costs the wheel plus at
    # most the one suffix block that finds the central directory; one library costs a fraction
    assert read.bytes_read <= read.size + RANGE_BLOCK
    one = read_members(http, pypi_wheel.url, lambda n: n.endswith("/_linalg.so"), str(tmp_path / "one"))
    assert one.paths == ("jax_cuda12_plugin/_linalg.so",)
    assert one.bytes_read < read.size / 4


JAX_TOML = f"""[framework]
name = "jax"
display_name = "JAX"
package = "jax"
platforms = ["linux/amd64"]
source = "https://example.org/primary"

[[release]]
versions = ["{VERSION}"]
python = ["3.11"]
source = "https://example.org/primary"

  [[release.variant]]
  name = "cuda12"
  cuda_min = "12.0"
  index_url = "https://pypi.org/simple"
  extra = "cuda12"
  cuda_from = "wheels"
  arch = "{ROW_ARCH}"
  source = "https://example.org/primary"
  confidence = "unconfirmed"
  note = "Arch list from .bazelrc."
"""


def test_audit_write_corrects_the_issue_row_and_names_the_wheel(
    pypi_wheel: DistFile, whole_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = write_minimatrix(tmp_path / "matrix")
    (matrix / "frameworks" / "jax.toml").write_text(JAX_TOML)
    body = whole_wheel.read_bytes()
    with Upstream() as server:
        url = f"{server.root}/files/{pypi_wheel.filename}"
        release = {"url": url, "filename": pypi_wheel.filename, "digests": {"sha256": pypi_wheel.sha256}}
        server.add(f"/pypi/{PROJECT}/json", Answer(json.dumps({"releases": {VERSION: [release]}}).encode()))
        server.add(f"/files/{pypi_wheel.filename}", Answer(body, content_type="application/zip", ranges=True))
        args = ["matrix", "refresh", "--matrix", str(matrix), "--audit", "jax", "--pypi-url", server.root]
        code = main([*args, "--write"])
        out, err = capsys.readouterr()
        assert (code, err) == (0, "")
        assert f"+ jax {VERSION} cuda12: arch {ROW_ARCH} -> {MEASURED} (read from {VERSION}): " in out
        assert "SASS sm_101 in the wheel, not in the row; SASS sm_120 in the wheel, not in the row" in out
        assert server.bytes_sent("/files/") <= len(body) + RANGE_BLOCK

        arch_source = f"{url}#sha256={pypi_wheel.sha256}"
        text = (matrix / "frameworks" / "jax.toml").read_text()
        assert f'  arch = "{MEASURED}"\n' in text
        assert f'  arch_source = "{arch_source}"\n' in text
        assert "confidence" not in text
        assert "the row said " + ROW_ARCH in text and "Earlier note: Arch list from .bazelrc." in text
        loaded = load_matrix(matrix)
        assert check_matrix(loaded) == []

        code = main(["resolve", "--matrix", str(matrix), "--driver", "550", "--framework", "jax", "--json"])
        stack = json.loads(capsys.readouterr().out)["stacks"][0]
        assert (code, stack["arch_source"], stack["caveats"]) == (0, arch_source, [])

        code = main(args)  # measured from this very wheel: nothing left to propose
        assert (code, capsys.readouterr().out.splitlines()[1]) == (
            0,
            "the matrix agrees with upstream: nothing to propose",
        )
