"""The loopback package index (tests/pyindex.py) against real clients: pip, uv and plain HTTP."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path

import pytest

from envbuild._testing.pyindex import JSON_TYPE, PackageIndex, build_wheel
from tests.helpers.paths import REPO

PYTHON = REPO / ".venv" / "bin" / "python"
UV = REPO / ".venv" / "bin" / "uv"
LOOPBACK = "127.0.0.1,localhost"
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(scope="module")
def built_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """app -> lib>=1 (2.0 -> base), platform-marked linuxonly / winonly, and extra `fast` -> speedup."""
    directory = tmp_path_factory.mktemp("built_wheels")
    build_wheel(
        directory,
        "app",
        "1.0",
        requires=["lib>=1", 'linuxonly; sys_platform == "linux"', 'winonly; sys_platform == "win32"'],
        extras={"fast": ["speedup"]},
        requires_python=">=3.8",
    )
    build_wheel(directory, "lib", "1.0")
    build_wheel(directory, "lib", "2.0", requires=["base"])
    build_wheel(directory, "base", "1.0")
    build_wheel(directory, "linuxonly", "1.0")
    build_wheel(directory, "winonly", "1.0")
    build_wheel(directory, "speedup", "1.0")
    return directory


@pytest.fixture
def index(built_wheels: Path) -> Iterator[PackageIndex]:
    """A fresh index (fresh request counts) over the shared built_wheels."""
    with PackageIndex(built_wheels) as served:
        yield served


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without pip/uv settings or proxies that would reach past loopback."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIP_", "UV_")) and key.lower() not in _PROXY_VARS
    }
    env.update(NO_PROXY=LOOPBACK, no_proxy=LOOPBACK, **extra)
    return env


def _get(url: str, accept: str | None = None) -> tuple[int, str, bytes, str]:
    """GET through a proxy-less opener: (status, content type, body, final URL)."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read(), response.url
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read(), url


# -- the wheels -----------------------------------------------------------------------------------------


def test_built_wheel_is_well_formed(tmp_path: Path) -> None:
    wheel = build_wheel(
        tmp_path,
        "My.Fancy-Pkg",
        "0.3",
        requires=["dep>=1", 'other; python_version < "3.12"'],
        extras={"cli": ["click", 'colorama; os_name == "nt"']},
        requires_python=">=3.10,<4",
    )
    assert wheel.name == "my_fancy_pkg-0.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = "my_fancy_pkg-0.3.dist-info"
        assert names == {
            "my_fancy_pkg/__init__.py",
            f"{dist_info}/METADATA",
            f"{dist_info}/WHEEL",
            f"{dist_info}/RECORD",
        }
        assert archive.read("my_fancy_pkg/__init__.py") == b'__version__ = "0.3"\n'

        metadata = HeaderParser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        assert metadata["Metadata-Version"] == "2.1"
        assert metadata["Name"] == "My.Fancy-Pkg"
        assert metadata["Version"] == "0.3"
        assert metadata["Requires-Python"] == ">=3.10,<4"
        assert metadata.get_all("Provides-Extra") == ["cli"]
        assert metadata.get_all("Requires-Dist") == [
            "dep>=1",
            'other; python_version < "3.12"',
            'click; extra == "cli"',
            'colorama; (os_name == "nt") and extra == "cli"',
        ]

        wheel_meta = HeaderParser().parsestr(archive.read(f"{dist_info}/WHEEL").decode())
        assert wheel_meta["Wheel-Version"] == "1.0"
        assert wheel_meta["Root-Is-Purelib"] == "true"
        assert wheel_meta["Tag"] == "py3-none-any"
        assert wheel_meta["Generator"]

        rows = list(csv.reader(io.StringIO(archive.read(f"{dist_info}/RECORD").decode())))
        assert {row[0] for row in rows} == names
        for path, digest, size in rows:
            if path == f"{dist_info}/RECORD":
                assert (digest, size) == ("", "")
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}"
            assert "=" not in expected
            assert int(size) == len(data)


# -- real clients ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("json_api", [True, False], ids=["json", "html-only"])
def test_pip_installs_the_chain_with_extra_and_markers(
    built_wheels: Path, tmp_path: Path, json_api: bool
) -> None:
    target = tmp_path / "target"
    with PackageIndex(built_wheels, json_api=json_api) as index:
        result = subprocess.run(
            [
                str(PYTHON),
                "-m",
                "pip",
                "install",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-input",
                "--index-url",
                index.url,
                "--target",
                str(target),
                "app[fast]",
            ],
            env=_clean_env(PIP_CONFIG_FILE=os.devnull),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, result.stdout + result.stderr

    installed = {p.name for p in target.glob("*.dist-info")}
    assert installed == {
        "app-1.0.dist-info",
        "lib-2.0.dist-info",
        "base-1.0.dist-info",
        "linuxonly-1.0.dist-info",
        "speedup-1.0.dist-info",
    }
    assert not (target / "winonly").exists()
    assert (target / "lib" / "__init__.py").read_text() == '__version__ = "2.0"\n'

    # What pip fetched: the pages of what it needed, and only the wheels it installed.
    assert index.requests["/simple/app/"] >= 1
    assert index.requests["/files/lib-2.0-py3-none-any.whl"] >= 1
    assert index.requests["/files/lib-1.0-py3-none-any.whl"] == 0
    assert index.requests["/files/winonly-1.0-py3-none-any.whl"] == 0
    assert index.requests["/simple/winonly/"] == 0


def _uv_compile(index: PackageIndex, platform: str, cwd: Path) -> dict[str, tuple[str, list[str]]]:
    """`uv pip compile` of app[fast] for `platform`: {name: (version, [sha256 hex, ...])}."""
    result = subprocess.run(
        [
            str(UV),
            "pip",
            "compile",
            "-",
            "--index-url",
            index.url,
            "--python-platform",
            platform,
            "--python-version",
            "3.11",
            "--generate-hashes",
            "--no-cache",
            "--no-header",
            "--no-annotate",
        ],
        input="app[fast]\n",
        env=_clean_env(UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never"),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in result.stdout.splitlines():
        pin = re.match(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if pin:
            current = pin.group(1).lower()
            pins[current] = (pin.group(2), [])
            continue
        digest = re.search(r"--hash=sha256:([0-9a-f]{64})", line)
        if digest and current:
            pins[current][1].append(digest.group(1))
    return pins


@pytest.mark.slow
def test_uv_compile_for_linux_pins_hashes_of_served_files(
    index: PackageIndex, built_wheels: Path, tmp_path: Path
) -> None:
    pins = _uv_compile(index, "x86_64-manylinux_2_28", tmp_path)
    assert set(pins) == {"app", "lib", "base", "linuxonly", "speedup"}
    assert pins["lib"][0] == "2.0"
    for name, (version, hashes) in pins.items():
        assert hashes == [_sha256(built_wheels / f"{name}-{version}-py3-none-any.whl")], name
    assert index.requests["/simple/app/"] >= 1


@pytest.mark.slow
def test_uv_compile_evaluates_markers_for_the_target_platform(
    index: PackageIndex, built_wheels: Path, tmp_path: Path
) -> None:
    pins = _uv_compile(index, "windows", tmp_path)
    assert set(pins) == {"app", "lib", "base", "winonly", "speedup"}
    assert "linuxonly" not in pins
    assert pins["winonly"] == ("1.0", [_sha256(built_wheels / "winonly-1.0-py3-none-any.whl")])
    assert pins["lib"] == ("2.0", [_sha256(built_wheels / "lib-2.0-py3-none-any.whl")])


@pytest.mark.slow
def test_uv_installs_the_chain(index: PackageIndex, tmp_path: Path) -> None:
    target = tmp_path / "target"
    result = subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "--python",
            str(PYTHON),
            "--no-cache",
            "--index-url",
            index.url,
            "--target",
            str(target),
            "app[fast]",
        ],
        env=_clean_env(UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert {p.name for p in target.glob("*.dist-info")} == {
        "app-1.0.dist-info",
        "lib-2.0.dist-info",
        "base-1.0.dist-info",
        "linuxonly-1.0.dist-info",
        "speedup-1.0.dist-info",
    }
    assert (target / "speedup" / "__init__.py").read_text() == '__version__ = "1.0"\n'


# -- the HTTP surface -----------------------------------------------------------------------------------


def _metadata_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        (member,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(member)


def test_project_page_json_and_html(index: PackageIndex, built_wheels: Path) -> None:
    digest = _sha256(built_wheels / "app-1.0-py3-none-any.whl")
    metadata = _metadata_of(built_wheels / "app-1.0-py3-none-any.whl")
    metadata_digest = hashlib.sha256(metadata).hexdigest()

    status, content_type, body, _ = _get(f"{index.url}/app/", accept=JSON_TYPE)
    assert status == 200
    assert content_type == JSON_TYPE
    page = json.loads(body)
    assert page["meta"] == {"api-version": "1.1"}
    assert page["name"] == "app"
    assert page["files"] == [
        {
            "filename": "app-1.0-py3-none-any.whl",
            "url": index.file_url("app-1.0-py3-none-any.whl"),
            "hashes": {"sha256": digest},
            "requires-python": ">=3.8",
            # PEP 714's name and PEP 658's, as PyPI serves both
            "core-metadata": {"sha256": metadata_digest},
            "dist-info-metadata": {"sha256": metadata_digest},
        }
    ]

    status, content_type, body, _ = _get(f"{index.url}/app/")
    assert status == 200
    assert content_type.startswith(("text/html", "application/vnd.pypi.simple.v1+html"))
    text = body.decode()
    assert f'href="../../files/app-1.0-py3-none-any.whl#sha256={digest}"' in text
    assert 'data-requires-python="&gt;=3.8"' in text
    assert f'data-core-metadata="sha256={metadata_digest}"' in text
    assert f'data-dist-info-metadata="sha256={metadata_digest}"' in text

    # The METADATA beside the wheel is the wheel's own, byte for byte.
    status, _, served, _ = _get(index.file_url("app-1.0-py3-none-any.whl") + ".metadata")
    assert status == 200 and served == metadata
    assert _get(index.file_url("nothing-1.0-py3-none-any.whl") + ".metadata")[0] == 404

    # The file behind the link is the wheel itself.
    status, _, data, _ = _get(page["files"][0]["url"])
    assert status == 200
    assert hashlib.sha256(data).hexdigest() == digest
    assert index.requests["/simple/app/"] == 2
    assert index.requests["/files/app-1.0-py3-none-any.whl"] == 1


def test_without_core_metadata_the_pages_name_none_and_the_route_is_gone(built_wheels: Path) -> None:
    """core_metadata=False: an index as devpi or an older mirror may be, where a resolver must
    download each candidate wheel to read its dependencies."""
    with PackageIndex(built_wheels, core_metadata=False) as plain:
        (entry,) = json.loads(_get(f"{plain.url}/app/", accept=JSON_TYPE)[2])["files"]
        assert "core-metadata" not in entry and "dist-info-metadata" not in entry
        assert b"data-core-metadata" not in _get(f"{plain.url}/app/")[2]
        assert _get(plain.file_url("app-1.0-py3-none-any.whl") + ".metadata")[0] == 404


def test_uv_resolves_from_the_metadata_without_downloading_a_wheel(
    built_wheels: Path, tmp_path: Path
) -> None:
    """What makes a lock against the torch index cheap: uv reads METADATA (a few KB), never the
    candidate wheels; with core_metadata=False the same compile downloads them."""
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    fetched = {}
    for flavour in (True, False):
        with PackageIndex(built_wheels, core_metadata=flavour) as served:
            command = [uv, "pip", "compile", "-", "--index-url", served.url, "--quiet", "--no-header"]
            command += ["--python-version", "3.11", "--cache-dir", str(tmp_path / f"cache-{flavour}")]
            done = subprocess.run(command, input="app\n", capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
            assert "lib==2.0" in done.stdout
            fetched[flavour] = sorted(p for p in served.requests if p.startswith("/files/"))
    assert fetched[True] and all(path.endswith(".whl.metadata") for path in fetched[True])
    assert fetched[False] and not any(path.endswith(".metadata") for path in fetched[False])


def test_content_negotiation_follows_quality(index: PackageIndex) -> None:
    pip_accept = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
    assert _get(f"{index.url}/lib/", accept=pip_accept)[1] == JSON_TYPE
    html_first = f"text/html, {JSON_TYPE}; q=0.5"
    assert _get(f"{index.url}/lib/", accept=html_first)[1] != JSON_TYPE
    assert _get(f"{index.url}/lib/", accept=f"{JSON_TYPE}; q=0")[1] != JSON_TYPE
    with PackageIndex(index.directory, json_api=False) as html_only:
        assert _get(f"{html_only.url}/lib/", accept=JSON_TYPE)[1] != JSON_TYPE


def test_project_list_and_missing_projects(index: PackageIndex) -> None:
    status, _, body, _ = _get(f"{index.url}/")
    assert status == 200
    for project in ("app", "base", "lib", "linuxonly", "speedup", "winonly"):
        assert f'href="{project}/"' in body.decode()
    status, content_type, body, _ = _get(f"{index.url}/", accept=JSON_TYPE)
    assert content_type == JSON_TYPE
    assert [p["name"] for p in json.loads(body)["projects"]] == [
        "app",
        "base",
        "lib",
        "linuxonly",
        "speedup",
        "winonly",
    ]

    assert _get(f"{index.url}/nothere/")[0] == 404
    assert _get(f"{index.root}/files/nothere-1.0-py3-none-any.whl")[0] == 404
    assert _get(f"{index.root}/files/..%2Fsecret.whl")[0] == 404
    assert _get(f"{index.root}/elsewhere")[0] == 404


def test_names_are_normalized_and_slashless_urls_redirect(tmp_path: Path) -> None:
    build_wheel(tmp_path, "Fancy_Pkg.Name", "1.0")
    with PackageIndex(tmp_path) as index:
        for spelling in ("fancy-pkg-name/", "Fancy_Pkg.Name/", "fancy-pkg-name", "FANCY--pkg__name"):
            status, _, body, final = _get(f"{index.url}/{spelling}", accept=JSON_TYPE)
            assert status == 200, spelling
            assert final == f"{index.url}/fancy-pkg-name/"
            assert json.loads(body)["files"][0]["filename"] == "fancy_pkg_name-1.0-py3-none-any.whl"
        assert index.requests["/simple/fancy-pkg-name"] == 1


def test_wheels_added_while_running_are_served(tmp_path: Path) -> None:
    build_wheel(tmp_path, "late", "1.0")
    with PackageIndex(tmp_path) as index:
        first = json.loads(_get(f"{index.url}/late/", accept=JSON_TYPE)[2])
        assert [f["filename"] for f in first["files"]] == ["late-1.0-py3-none-any.whl"]
        assert "requires-python" not in first["files"][0]
        assert _get(f"{index.url}/later/")[0] == 404

        build_wheel(tmp_path, "late", "1.1", requires_python='>=3.9,!="3.9.0"')
        build_wheel(tmp_path, "later", "1.0")
        second = json.loads(_get(f"{index.url}/late/", accept=JSON_TYPE)[2])
        assert [f["filename"] for f in second["files"]] == [
            "late-1.0-py3-none-any.whl",
            "late-1.1-py3-none-any.whl",
        ]
        assert second["files"][1]["requires-python"] == '>=3.9,!="3.9.0"'
        assert 'data-requires-python="&gt;=3.9,!=&quot;3.9.0&quot;"' in _get(f"{index.url}/late/")[2].decode()
        assert _get(f"{index.url}/later/")[0] == 200
