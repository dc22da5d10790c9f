"""envbuild.image.auditcache (issue 31): an audit's facts kept by the image's ordered layer digests and
the cuobjdump that read them, and every entry that is not what envbuild wrote read as a miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.audit.kernels import Kernels
from envbuild.image import auditcache

LAYERS = ["sha256:" + "1" * 64, "sha256:" + "2" * 64]
FACTS = {
    "usr/lib/libplain.so": Kernels(sass=(), ptx=()),
    "site-packages/jax_plugins/_linalg.so": Kernels(
        sass=("sm_80", "sm_90a", "sm_100f"), ptx=("compute_120",)
    ),
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "audit"


@pytest.fixture
def cuobjdump(tmp_path: Path) -> str:
    """A stand-in binary: the key holds its sha256, so its bytes are all that matters here."""
    path = tmp_path / "cuobjdump"
    path.write_bytes(b"\x7fELF cuobjdump 13.0")
    return str(path)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json"))


def test_what_was_stored_for_the_layers_is_loaded_for_them(cache: Path, cuobjdump: str) -> None:
    assert auditcache.load(LAYERS, cuobjdump) is None
    auditcache.store(LAYERS, cuobjdump, FACTS)
    assert auditcache.load(LAYERS, cuobjdump) == FACTS
    assert list(auditcache.load(LAYERS, cuobjdump)) == list(FACTS)  # the order read is kept
    assert len(entries(cache)) == 1


def test_other_layers_an_order_or_another_cuobjdump_miss(cache: Path, cuobjdump: str, tmp_path: Path) -> None:
    auditcache.store(LAYERS, cuobjdump, FACTS)
    assert auditcache.load(LAYERS[::-1], cuobjdump) is None  # the same layers, stacked the other way
    assert auditcache.load(LAYERS[:1], cuobjdump) is None
    assert auditcache.load([*LAYERS, "sha256:" + "3" * 64], cuobjdump) is None
    other = tmp_path / "cuobjdump-12.9"
    other.write_bytes(b"\x7fELF cuobjdump 12.9")
    assert auditcache.load(LAYERS, str(other)) is None


def test_a_new_format_reads_afresh(cache: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch) -> None:
    auditcache.store(LAYERS, cuobjdump, FACTS)
    monkeypatch.setattr(auditcache, "FORMAT", auditcache.FORMAT + 1)
    assert auditcache.load(LAYERS, cuobjdump) is None


@pytest.mark.parametrize(
    "written",
    [
        b"not json",
        b"[]",
        json.dumps({"format": 1, "layers": LAYERS}).encode(),  # no objects
        json.dumps({"format": 1, "layers": LAYERS[:1], "objects": []}).encode(),  # another image's
        json.dumps({"format": 1, "layers": LAYERS, "objects": [["a.so", "sm_90", []]]}).encode(),
        json.dumps({"format": 1, "layers": LAYERS, "objects": [["a.so", ["sm_90;rm -rf /"], []]]}).encode(),
        json.dumps({"format": 1, "layers": LAYERS, "objects": [[7, [], []]]}).encode(),
        json.dumps({"format": 1, "layers": LAYERS, "objects": [["a.so", [], []], ["b.so"]]}).encode(),
    ],
    ids=[
        "not-json",
        "a-list",
        "no-objects",
        "other-layers",
        "string-arch",
        "bad-arch",
        "path-not-str",
        "short",
    ],
)
def test_an_entry_that_is_not_what_envbuild_wrote_is_a_miss(
    cache: Path, cuobjdump: str, written: bytes
) -> None:
    auditcache.store(LAYERS, cuobjdump, FACTS)
    (entry,) = entries(cache)
    entry.write_bytes(written)
    assert auditcache.load(LAYERS, cuobjdump) is None
    auditcache.store(LAYERS, cuobjdump, FACTS)  # the audit that read afresh replaces it
    assert auditcache.load(LAYERS, cuobjdump) == FACTS


def test_an_entry_past_the_size_bound_is_not_read(
    cache: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    auditcache.store(LAYERS, cuobjdump, FACTS)
    (entry,) = entries(cache)
    monkeypatch.setattr(auditcache, "MAX_BYTES", entry.stat().st_size - 1)
    assert auditcache.load(LAYERS, cuobjdump) is None


def test_layer_ids_that_are_not_sha256_diff_ids_are_never_keyed(cache: Path, cuobjdump: str) -> None:
    for layers in (["sha256:short"], ["md5:" + "1" * 32], [None]):
        auditcache.store(layers, cuobjdump, FACTS)  # type: ignore[arg-type]
        assert auditcache.load(layers, cuobjdump) is None  # type: ignore[arg-type]
    assert entries(cache) == []


def test_an_empty_cache_dir_turns_it_off(
    tmp_path: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", "")
    auditcache.store(LAYERS, cuobjdump, FACTS)
    assert auditcache.load(LAYERS, cuobjdump) is None
    assert auditcache.directory() is None


def test_a_cache_that_cannot_be_written_is_skipped(
    mounted, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only filesystem (a real tmpfs; root's permission bits would not refuse): the audit's
    answer does not depend on the cache, so the store does nothing and says nothing."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(mounted("ro,size=1m")))
    auditcache.store(LAYERS, cuobjdump, FACTS)
    assert auditcache.load(LAYERS, cuobjdump) is None
