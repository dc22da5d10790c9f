"""Issue 33, hostile conda channels: `envbuild lock` of a conda-strategy spec against a real conda
channel on loopback (real `.tar.bz2` packages, indexed by rattler's own indexer) whose repodata.json
the test then rewrites as a broken or hostile channel would serve it: endless, nested past any
parser, a record without sha256, file names holding `$(id)`, a slash or a newline, a file name that
contradicts its record's name, version and build, and an `info.base_url` that moves the downloads to
another host.

Each case: the CLI's exit code and error text (naming the channel and the package), no traceback,
the bytes the server sent counted, no envbuild.lock written and nothing left in the repodata cache.
The base image is given with its digest, so no registry is asked; the spec has no pip packages, so no
Python index is either.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envbuild._testing.condachannel import CondaChannel, stack_channel
from envbuild.matrix.load import load_matrix
from envbuild.plan.plan import build_plan
from envbuild.spec.model import load_spec
from tests.helpers.locking import run_lock

BASE = "mambaorg/micromamba:2.6.1@sha256:" + "b" * 64
CAP = 1 << 20  # ENVBUILD_MAX_DOWNLOAD_BYTES in these tests: an endless answer stops at 1 MiB
ENDLESS = 256 << 20  # what the endless server sends at most, so a reader that never stops still ends


def spec_text(channel: str) -> str:
    return (
        '[stack]\ndriver = "580"\ngpus = ["H100"]\nframework = "jax"\npython = "3.12"\n'
        'strategy = "conda"\ncuda = "12.9"\n\n'
        f'[packages]\nconda = ["app"]\nconda-channels = ["{channel}"]\n'
    )


class Served:
    """A loopback HTTP server over a channel directory that counts the bytes it sent, and streams
    an endless linux-64/repodata.json when `endless` is set."""

    def __init__(self, root: Path) -> None:
        self.sent = 0
        self.endless = False
        outer = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if outer.endless and self.path.endswith("/linux-64/repodata.json"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.close_connection = True
                    filler = b'"x": 1, ' * 8192
                    try:
                        self.wfile.write(b'{"info": {"subdir": "linux-64"}, "packages": {')
                        while outer.sent < ENDLESS:
                            self.wfile.write(filler)
                            outer.sent += len(filler)
                    except OSError:  # the client hung up: what a bounded reader does
                        pass
                    return
                super().do_GET()

            def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
                data = source.read()
                outer.sent += len(data)
                outputfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ENVBUILD_MAX_DOWNLOAD_BYTES", str(CAP))


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[tuple[CondaChannel, Served]]:
    (tmp_path / "probe.toml").write_text(spec_text("conda-forge"))
    spec = load_spec(str(tmp_path / "probe.toml"))
    framework = build_plan(load_matrix(), spec, spec.targets[0]).conda_framework
    built = stack_channel(tmp_path / "channel", framework, python="3.12")
    built.index()
    served = Served(built.root)
    yield built, served
    served.stop()


def rewrite(channel: CondaChannel, edit) -> None:  # type: ignore[no-untyped-def]
    """linux-64/repodata.json as `edit(repodata)` leaves it (app 1.0 h0_0 is a linux-64 record)."""
    path = channel.root / "linux-64" / "repodata.json"
    repodata = json.loads(path.read_text())
    edit(repodata)
    path.write_text(json.dumps(repodata))


def app_entry(repodata: dict) -> tuple[str, dict]:
    (key,) = [k for k in repodata["packages"] if k.startswith("app-")]
    return key, repodata["packages"][key]


def lock(capsys, tmp_path: Path, url: str) -> tuple[int, str, Path]:  # type: ignore[no-untyped-def]
    directory = tmp_path / "project"
    directory.mkdir(exist_ok=True)
    (directory / "envbuild.toml").write_text(spec_text(url))
    code, out, err = run_lock(capsys, directory, "--base-image", BASE)
    return code, out + err, directory


def cache_files(tmp_path: Path) -> list[str]:
    """What the lock left in the conda repodata cache that is not a whole, revalidatable copy."""
    root = tmp_path / "cache" / "conda"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "partial" in p.name)


def refused(code: int, text: str, directory: Path, *wanted: str) -> None:
    assert code == 1, text
    for part in wanted:
        assert part in text, text
    assert "Traceback" not in text and "internal error" not in text.lower()
    assert not (directory / "envbuild.lock").exists()


def test_an_endless_repodata_json_stops_at_the_cap_and_leaves_nothing(
    capsys, tmp_path: Path, channel
) -> None:
    _, served = channel
    served.endless = True
    code, text, directory = lock(capsys, tmp_path, served.url)
    refused(code, text, directory, served.url, "larger than envbuild reads", "ENVBUILD_MAX_DOWNLOAD_BYTES")
    # the reader hung up near the cap: the rest of the 256 MiB was never sent (socket buffers aside)
    assert served.sent < 64 * CAP, served.sent
    repodata = tmp_path / "cache" / "conda" / "repodata"
    assert not [p for p in repodata.rglob("*linux-64*")], list(repodata.rglob("*"))


def test_a_record_without_sha256_is_a_lock_error_naming_channel_and_package(
    capsys, tmp_path: Path, channel
) -> None:
    built, served = channel
    rewrite(built, lambda repodata: app_entry(repodata)[1].pop("sha256"))
    code, text, directory = lock(capsys, tmp_path, served.url)
    refused(code, text, directory, f"the conda channel {served.url}", "app 1.0 h0_0", "sha256 is missing")
    assert cache_files(tmp_path) == []


def rename(new_key: str):  # type: ignore[no-untyped-def]
    def edit(repodata: dict) -> None:
        key, _ = app_entry(repodata)
        repodata["packages"][new_key] = repodata["packages"].pop(key)

    return edit


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("app-1.0-$(id).tar.bz2", "not a safe package file name"),
        ("app-1.0-h0_0;id.tar.bz2", "not a safe package file name"),
        ("app-1.0-h0/0.tar.bz2", "not a safe package file name"),
        ("app-1.0-h0_0/.tar.bz2", "not a safe package file name"),
        ("app-2.0-h0_0.tar.bz2", "contradict the file it downloads"),
    ],
    ids=["command-substitution", "semicolon", "slash", "trailing-slash", "identity-mismatch"],
)
def test_an_unsafe_or_contradicting_file_name_is_a_lock_error(
    capsys, tmp_path: Path, channel, key: str, says: str
) -> None:
    built, served = channel
    rewrite(built, rename(key))
    code, text, directory = lock(capsys, tmp_path, served.url)
    refused(code, text, directory, f"the conda channel {served.url}", "app 1.0 h0_0", says)
    assert cache_files(tmp_path) == []


@pytest.mark.parametrize(
    "body",
    [
        '{"info": {"subdir": "linux-64"}, "packages": {"app-1.0-h0\\n_0.tar.bz2": {}}}',
        '{"info": {"subdir": "linux-64"}, "packages": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"info": {"subdir": "linux-64"}, "packages": {',
        "5",
    ],
    ids=["newline-in-file-name", "nested", "cut-short", "number"],
)
def test_a_repodata_json_that_is_not_conda_repodata_is_a_lock_error(
    capsys, tmp_path: Path, channel, body: str
) -> None:
    built, served = channel
    (built.root / "linux-64" / "repodata.json").write_text(body)
    code, text, directory = lock(capsys, tmp_path, served.url)
    refused(
        code, text, directory, f"the conda channel {served.url} could not be read", "linux-64/repodata.json"
    )


def test_a_base_url_on_another_host_is_locked_and_said(capsys, tmp_path: Path, channel) -> None:
    """The choice: recorded and shown, not refused (a mirror's CDN is real, and the sha256 still
    comes from the channel): the lock's url names the other host, and the lock's output says so."""
    built, served = channel
    rewrite(
        built, lambda repodata: repodata["info"].update(base_url="https://cdn.example.net/mirror/linux-64/")
    )
    code, text, directory = lock(capsys, tmp_path, served.url)
    assert code == 0, text
    assert "download from cdn.example.net" in text and "info.base_url" in text and "app" in text, text
    locked = (directory / "envbuild.lock").read_text()
    assert 'url = "https://cdn.example.net/mirror/linux-64/app-1.0-h0_0.tar.bz2"' in locked
    assert cache_files(tmp_path) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [('build = "h0_0"', 'build = "h9_9"'), ("app-1.0-h0_0.tar.bz2", "app-1.0-h0_0;id.tar.bz2")],
    ids=["build-edited", "file-name-edited"],
)
def test_render_refuses_a_locked_identity_its_url_contradicts(
    capsys, tmp_path: Path, channel, old: str, new: str
) -> None:
    """The read side of the same check: a lock whose conda entry was edited so that its name,
    version and build no longer match its URL's file name (or the file name is unsafe) is refused by
    render, naming the entry, before anything is rendered."""
    from envbuild.cli.app import main

    _, served = channel
    code, text, directory = lock(capsys, tmp_path, served.url)
    assert code == 0, text
    path = directory / "envbuild.lock"
    locked = path.read_text()
    entry = locked.index('name = "app"')
    edited = locked[:entry] + locked[entry:].replace(old, new, 1)
    assert edited != locked
    path.write_text(edited)
    out = tmp_path / "rendered"
    code = main(["render", "-f", str(directory / "envbuild.toml"), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "envbuild.lock is malformed" in err and "(app)" in err and "Traceback" not in err, err
    assert not out.exists()


def test_a_relock_revalidates_the_cached_repodata_instead_of_fetching_it_again(
    capsys, tmp_path: Path, channel
) -> None:
    """The cache is what bounds a second lock: the server answers 304 to the ETag/Last-Modified
    the first fetch kept, so a relock that solves again receives no repodata bytes."""
    built, served = channel
    code, text, directory = lock(capsys, tmp_path, served.url)
    assert code == 0, text
    first = served.sent
    repodata = sum(len((built.root / s / "repodata.json").read_bytes()) for s in ("linux-64", "noarch"))
    assert first >= repodata
    served.sent = 0
    code, out, err = run_lock(capsys, directory, "--upgrade", "--base-image", BASE)
    assert code == 0, out + err
    assert served.sent == 0, served.sent
    assert cache_files(tmp_path) == []
