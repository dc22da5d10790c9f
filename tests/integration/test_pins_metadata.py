"""The nvidia-* pins against the real packages on PyPI (issue 15, item 3).

(a) every name a pin constrains is one the framework's wheel METADATA requires (a misspelled name
    would make the pin a silent no-op in constraints.txt);
(b) each pin, intersected with the framework's own requirement, selects exactly the stack's CUDA X.Y
    (and the pinned cuDNN X.Y) from PyPI's release list, and `pip download` of the small runtime
    wheel under its pin gets that X.Y.

PyPI serves no PEP 658 metadata for these wheels (pip --dry-run downloads a 700 MB cuDNN wheel to
read it), so METADATA is read by HTTP range requests and versions from the PEP 691 index page.
Needs https://pypi.org: skips without it, and fails under ENVBUILD_REQUIRE_DOCKER=1 (CI).
"""

from __future__ import annotations

import email.parser
import io
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from functools import cache

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, canonicalize_version, parse_wheel_filename
from packaging.version import Version

from envbuild.matrix.model import Matrix
from envbuild.resolve.pins import stack_pins
from envbuild.resolve.query import build_query
from envbuild.resolve.solver import Stack, resolve
from tests.helpers.audit import pypi_only_env

PYPI = "https://pypi.org/simple"



def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args, "--index-url", PYPI],
        capture_output=True,
        text=True,
        timeout=180,
        env=pypi_only_env(),
        check=False,
    )


def _unreachable(why: str) -> None:
    if os.environ.get("ENVBUILD_REQUIRE_DOCKER") == "1":
        pytest.fail(f"PyPI is needed here and {why}")
    pytest.skip(f"PyPI unreachable ({why}); set ENVBUILD_REQUIRE_DOCKER=1 to fail instead")


def _get(url: str, accept: str) -> bytes:
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as response:
            return response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        _unreachable(str(exc))
        raise


@cache
def _project(name: str) -> dict:
    """PyPI's JSON simple page (PEP 691): files, versions, and which files have PEP 658 metadata."""
    return json.loads(_get(f"{PYPI}/{name}/", "application/vnd.pypi.simple.v1+json"))


class _RemoteFile(io.RawIOBase):
    """A wheel on PyPI read by HTTP range requests: zipfile reads the central directory and the
    METADATA member (tens of kB), never the hundreds of MB of a TensorFlow wheel."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._fetch(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _fetch(self, n: int) -> bytes:
        end = min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        try:
            with urllib.request.urlopen(request, timeout=60, context=context) as response:
                assert response.status == 206, "PyPI's file host must answer range requests"
                data = response.read()
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            _unreachable(str(exc))
            raise
        self.pos += len(data)
        return data


@cache
def _requires_dist(name: str, version: str) -> tuple[str, ...]:
    """Requires-Dist of one release, from a Linux x86_64 (or pure) wheel's METADATA."""
    for file in _project(name)["files"]:
        filename = file["filename"]
        if not filename.endswith(".whl") or ("x86_64" not in filename and "none-any" not in filename):
            continue
        if canonicalize_version(parse_wheel_filename(filename)[1]) != canonicalize_version(version):
            continue
        with zipfile.ZipFile(io.BufferedReader(_RemoteFile(file["url"], file["size"]), 65536)) as wheel:
            member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = email.parser.BytesParser().parsebytes(wheel.read(member))
        return tuple(metadata.get_all("Requires-Dist") or ())
    raise AssertionError(f"PyPI has no Linux x86_64 wheel for {name}=={version}")


def _name(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


def _for_extra(requires: tuple[str, ...], extra: str) -> list[Requirement]:
    found = []
    for text in requires:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}):
            found.append(requirement)
    return found


def _nvidia_requirements(stack: Stack) -> list[Requirement]:
    """The framework's nvidia-* requirements as its wheels' METADATA states them."""
    version = stack.release.version
    if stack.framework.name == "tensorflow":
        requires = _for_extra(_requires_dist("tensorflow", version), "and-cuda")
    else:
        jax = _for_extra(_requires_dist("jax", version), stack.variant.extra or "")
        plugin = next(r for r in jax if "cuda12-plugin" in r.name)
        plugin_version = next(iter(plugin.specifier)).version  # jax pins its plugin: ==V or >=V,<=V
        requires = _for_extra(_requires_dist(plugin.name, plugin_version), "with-cuda")
    return [r for r in requires if r.name.startswith("nvidia-")]


def _newest_allowed(name: str, specifier: SpecifierSet) -> Version:
    """What a resolver installs for a package without dependencies of its own that matter here:
    the newest final release the specifier admits."""
    versions = [Version(v) for v in _project(name)["versions"]]
    allowed = [v for v in versions if not v.is_prerelease and v in specifier]
    assert allowed, (name, str(specifier))
    return max(allowed)


CASES = [  # (framework, driver, GPU): the drivers, and a GPU that needs the cuDNN pin
    ("tensorflow", "560.35.03", "V100"),
    ("tensorflow", "575.57.08", "A100"),
    ("jax", "575.57.08", "V100"),
    ("jax", "560.35.03", "T4"),
]


def _stack(matrix: Matrix, framework: str, driver: str, gpu: str) -> Stack:
    query = build_query(matrix, driver=driver, gpus=[gpu], frameworks=[framework], strategy="wheels", limit=1)
    return resolve(matrix, query).stacks[0]


@pytest.mark.parametrize(("framework", "driver", "gpu"), CASES)
def test_pins_name_packages_the_framework_requires(
    matrix: Matrix, framework: str, driver: str, gpu: str
) -> None:
    stack = _stack(matrix, framework, driver, gpu)
    pins = stack_pins(stack, "wheels")
    assert pins, "an open-ranged build always gets CUDA pins"
    required = {canonicalize_name(r.name) for r in _nvidia_requirements(stack)}
    assert {_name(p) for p in pins} <= required, sorted({_name(p) for p in pins} - required)


@pytest.mark.parametrize(("framework", "driver", "gpu"), CASES)
def test_pins_select_exactly_the_stacks_cuda_and_cudnn(
    matrix: Matrix, framework: str, driver: str, gpu: str
) -> None:
    """Each pin intersected with the framework's own requirement admits releases of exactly the
    stack's X.Y, and the newest of them (what pip or uv installs) is one."""
    stack = _stack(matrix, framework, driver, gpu)
    pins = {_name(p): Requirement(p).specifier for p in stack_pins(stack, "wheels")}
    cuda = f"{stack.cuda[0]}.{stack.cuda[1]}"
    for requirement in _nvidia_requirements(stack):
        name = canonicalize_name(requirement.name)
        if name not in pins:
            continue
        picked = _newest_allowed(name, requirement.specifier & pins[name])
        if name.startswith("nvidia-cudnn"):
            assert stack.cudnn_pin is not None
            assert picked.release[:2] == stack.cudnn_pin, (name, picked)
        else:
            assert f"{picked.release[0]}.{picked.release[1]}" == cuda, (name, picked, cuda)
        unpinned = _newest_allowed(name, requirement.specifier)
        assert unpinned >= picked  # the pin is what holds the install back, not the framework
    assert (stack.cudnn_pin is not None) == (gpu in ("V100", "P100"))


def test_pip_download_under_the_pin_gets_that_minor(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The one real download: the ~1 MB runtime wheel, through pip, under the R560 pin."""
    dest = tmp_path_factory.mktemp("wheels")
    proc = _pip(
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        "nvidia-cuda-runtime-cu12==12.6.*",
    )
    if proc.returncode != 0:
        if re.search(r"(?i)connection|resolve host|network|timed out", proc.stderr):
            _unreachable(proc.stderr.strip().splitlines()[-1])
        raise AssertionError(proc.stderr)
    (wheel,) = dest.glob("*.whl")
    assert re.match(r"nvidia_cuda_runtime_cu12-12\.6\.\d+", wheel.name), wheel.name
