"""Why uv failed, read from its real stderr (tests/fixtures/uv/, captured from uv 0.13 against
loopback servers: a closed port, an unresolvable host, servers answering 503, 500, 401 and 403, a
self-signed HTTPS server, https:// to a plain-http server, proxies on a closed port, a server that
never answers, UV_OFFLINE with an empty cache, and two pins that conflict). Issue 18, item 5: an
index that cannot be reached is said to be that, with its URL, and never "relax the pins"."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.lock.uvfail import read_cause, uv_failure
from tests.helpers.paths import FIXTURES

UV = FIXTURES / "uv"


def sample(name: str) -> str:
    return (UV / f"{name}.txt").read_text()


def fetched(name: str) -> str:
    """The index URL a fixture's uv run was given (its ports were free ports at capture time)."""
    text = sample(name)
    url = text.split("Failed to fetch: ", 1)[1].split()[0]
    return url[: url.index("/simple/") + len("/simple")]


@pytest.mark.parametrize(
    ("name", "kind", "reason"),
    [
        ("refused", "unreachable", "connection refused"),
        ("refused-after-retries", "unreachable", "connection refused"),
        ("proxy-http-refused", "unreachable", "connection refused"),
        ("proxy-https-refused", "unreachable", "the proxy could not be reached"),
        ("dns", "unreachable", "DNS lookup failed"),
        ("timeout", "unreachable", "timed out"),
        ("http503", "http", "HTTP 503 Service Unavailable"),
        ("http500", "http", "HTTP 500 Internal Server Error"),
        ("tls-untrusted", "tls", "TLS: certificate not trusted, Other(OtherError(CaUsedAsEndEntity))"),
        (
            "tls-to-plain-http",
            "tls",
            "TLS handshake failed: received corrupt message of type InvalidContentType",
        ),
    ],
)
def test_each_network_failure_is_read_with_its_url(name: str, kind: str, reason: str) -> None:
    cause = read_cause(sample(name))
    assert (cause.kind, cause.reason) == (kind, reason)
    assert cause.url is not None and cause.url.startswith(fetched(name) + "/")


@pytest.mark.parametrize("name", ["refused", "dns", "http503", "tls-untrusted", "proxy-https-refused"])
def test_a_network_failure_names_the_index_and_never_the_pins(name: str) -> None:
    index = fetched(name)
    error = uv_failure(
        sample(name),
        during="locking target default, framework layer",
        indexes=(index + "/",),
        requirements=("lib==2.0",),
    )
    assert error.exit_code == 1
    assert error.message.startswith(f"could not reach the package index {index}/ (")
    assert ") while locking target default, framework layer:\n" in error.message
    assert "relax" not in error.message + (error.fix or "")
    assert "Failed to fetch" in error.message  # uv's own lines follow, for the details


def test_unreachable_fix_names_network_proxy_mirror_and_offline() -> None:
    error = uv_failure(sample("refused"), during="x", indexes=(), requirements=())
    for word in ("network", "HTTPS_PROXY", "index-url", "mirror", "UV_OFFLINE=1"):
        assert word in (error.fix or "")


def test_a_file_outside_the_indexes_is_named_by_its_url() -> None:
    error = uv_failure(
        sample("http503"), during="x", indexes=("https://pypi.example/simple",), requirements=()
    )
    assert error.message.startswith("could not reach http://127.0.0.1:")
    assert "(HTTP 503 Service Unavailable)" in error.message


@pytest.mark.parametrize(("name", "status"), [("http401", "401 Unauthorized"), ("http403", "403 Forbidden")])
def test_a_refused_login_names_the_credentials(name: str, status: str) -> None:
    cause = read_cause(sample(name))
    assert cause.kind == "auth" and cause.reason == status and cause.url.startswith("http://127.0.0.1:")
    error = uv_failure(sample(name), during="locking target t, user layer", indexes=(), requirements=("lib",))
    assert f"refused the credentials ({status}) while locking target t, user layer" in error.message
    assert "relax" not in error.message + (error.fix or "") and ".netrc" in (error.fix or "")


def test_offline_with_an_empty_cache_says_offline() -> None:
    error = uv_failure(
        sample("offline"), during="locking target t, user layer", indexes=(), requirements=("lib",)
    )
    assert read_cause(sample("offline")).kind == "offline"
    assert error.message.startswith("uv is offline")
    assert "relax" not in error.message + (error.fix or "") and "UV_OFFLINE" in (error.fix or "")


def test_a_real_conflict_keeps_the_relax_the_pins_advice() -> None:
    assert read_cause(sample("conflict")).kind == "conflict"
    error = uv_failure(
        sample("conflict"),
        during="locking target t, user layer",
        indexes=("http://127.0.0.1:1/simple",),
        requirements=("lib==2.0",),
    )
    assert error.message.startswith(
        "the resolver found no set of versions for lib==2.0 while locking target t"
    )
    assert "you require lib==2.0 and lib==1.0" in error.message
    assert (error.fix or "").startswith("relax the pins named above")


def test_credentials_in_a_failed_url_are_never_shown() -> None:
    text = sample("refused").replace("http://127.0.0.1", "http://alice:s3cret@127.0.0.1")
    error = uv_failure(text, during="x", indexes=("http://alice:s3cret@127.0.0.1:1/simple",), requirements=())
    assert "s3cret" not in error.render() and "alice" not in error.render()
    assert "http://***@127.0.0.1" in error.message


def test_text_uv_never_wrote_is_shown_as_it_is() -> None:
    cause = read_cause("error: something new went wrong\n  cause: a detail\n")
    assert cause == ("other", None, "a detail")
    error = uv_failure(
        "error: something new went wrong\n  cause: a detail\n", during="x", indexes=(), requirements=()
    )
    assert error.message.startswith("uv failed while x:") and "a detail" in error.message


def test_every_fixture_is_classified() -> None:
    """A fixture added without a row above still has to be read as some cause other than "other"."""
    names = sorted(p.stem for p in Path(UV).glob("*.txt"))
    assert len(names) >= 14
    assert all(read_cause(sample(n)).kind != "other" for n in names)
