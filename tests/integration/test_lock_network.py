"""`envbuild lock` when uv cannot reach an index (issue 18, item 5), through the command line,
against real servers on loopback: a closed port, a host name that cannot resolve, a server answering
503 or 401, an HTTPS server with a self-signed certificate, proxies on a closed port, and UV_OFFLINE
with an empty cache. Each says what happened and the URL, exits 1, writes no lock, and never
advises relaxing pins; a real conflict still does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.badindex import StatusIndex, closed_url, no_retries_and_no_proxy, untrusted_tls_index
from tests.helpers.locking import run_lock, spec_text

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
FRAMEWORK = "target default, framework layer"


@pytest.fixture(autouse=True)
def _plain_network(monkeypatch: pytest.MonkeyPatch) -> None:
    no_retries_and_no_proxy(monkeypatch)


def lock_with(capsys, project: Path, framework_url: str, user_url: str = "http://127.0.0.1:1/simple"):
    (project / "envbuild.toml").write_text(spec_text(user_url, framework_url))
    code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert not (project / "envbuild.lock").exists()
    assert "relax" not in err and "Traceback" not in err
    return code, out, err


def test_a_closed_port_is_connection_refused_with_the_url(capsys, tmp_path: Path) -> None:
    url = closed_url()
    code, _, err = lock_with(capsys, tmp_path, url)
    assert code == 1
    assert (
        f"error: could not reach the package index {url} (connection refused) while locking {FRAMEWORK}"
        in err
    )
    assert "fix: check the network" in err and "UV_OFFLINE=1" in err


def test_a_host_that_does_not_resolve_is_a_dns_failure(capsys, tmp_path: Path) -> None:
    code, _, err = lock_with(capsys, tmp_path, "http://nonexistent.invalid/simple")
    assert code == 1
    assert (
        "error: could not reach the package index http://nonexistent.invalid/simple (DNS lookup failed) "
        f"while locking {FRAMEWORK}"
    ) in err


def test_a_503_is_the_index_failing(capsys, tmp_path: Path) -> None:
    with StatusIndex(503) as index:
        code, _, err = lock_with(capsys, tmp_path, index.url)
    assert code == 1
    assert f"could not reach the package index {index.url} (HTTP 503 Service Unavailable) while" in err
    assert "retry later" in err


def test_an_untrusted_certificate_is_a_tls_error(capsys, tmp_path: Path) -> None:
    with untrusted_tls_index(tmp_path) as url:
        code, _, err = lock_with(capsys, tmp_path, url)
    assert code == 1
    assert f"could not reach the package index {url} (TLS: certificate not trusted" in err
    assert "SSL_CERT_FILE" in err


def test_a_proxy_that_is_down_is_named_for_https(capsys, tmp_path: Path, monkeypatch) -> None:
    proxy = closed_url().removesuffix("/simple")
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    code, _, err = lock_with(capsys, tmp_path, "https://pypi.example/simple")
    assert code == 1
    assert (
        "could not reach the package index https://pypi.example/simple (the proxy could not be reached; "
        f"the request went through the proxy {proxy} (HTTPS_PROXY)) while locking {FRAMEWORK}"
    ) in err


def test_a_proxy_that_is_down_is_named_for_http(capsys, tmp_path: Path, monkeypatch) -> None:
    proxy = closed_url().removesuffix("/simple")
    monkeypatch.setenv("http_proxy", proxy)
    with StatusIndex(404) as index:  # up, but never asked: the proxy is
        code, _, err = lock_with(capsys, tmp_path, index.url)
    assert code == 1
    assert (
        f"could not reach the package index {index.url} (connection refused; the request went through "
        f"the proxy {proxy} (http_proxy))"
    ) in err


def test_a_proxy_with_a_password_is_not_printed(capsys, tmp_path: Path, monkeypatch) -> None:
    proxy = closed_url().removesuffix("/simple").replace("http://", "http://proxyuser:hunter2@")
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    code, _, err = lock_with(capsys, tmp_path, "https://pypi.example/simple")
    assert code == 1 and "through the proxy http://***@127.0.0.1:" in err
    assert "hunter2" not in err and "proxyuser" not in err


def test_an_index_refusing_the_login_names_the_credentials(capsys, tmp_path: Path) -> None:
    with StatusIndex(401) as index:
        code, _, err = lock_with(capsys, tmp_path, index.url)
    assert code == 1
    assert f"the package index {index.url} refused the credentials (401 Unauthorized) while locking" in err
    assert "~/.netrc" in err


def test_uv_offline_with_an_empty_cache_says_offline(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    with StatusIndex(404) as index:
        code, _, err = lock_with(capsys, tmp_path, index.url)
    assert code == 1
    assert f"error: uv is offline and its cache lacks a package needed while locking {FRAMEWORK}" in err
    assert "unset UV_OFFLINE" in err


def test_the_user_layer_is_named_when_its_index_is_down(capsys, tmp_path: Path, indexes) -> None:
    _, framework = indexes
    url = closed_url()
    code, _, err = lock_with(capsys, tmp_path, framework.url, user_url=url)
    assert code == 1
    assert (
        f"could not reach the package index {url} (connection refused) while locking target default, "
        "user layer" in err
    )


def test_check_names_an_unreachable_index_too(capsys, tmp_path: Path, indexes, monkeypatch) -> None:
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    assert run_lock(capsys, tmp_path, "--base-image", BASE)[0] == 0
    proxy = closed_url().removesuffix("/simple")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    code, _, err = run_lock(capsys, tmp_path, "--check")
    assert code == 1
    assert f"could not reach the package index {framework.url} (connection refused; the request went " in err
    assert "relax" not in err
