"""envbuild.image.auditcache (issues 31 and 32): an audit's facts kept per layer, by the layer's diff id
and the cuobjdump that read them, and every entry that is not what envbuild wrote read as a miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.audit.kernels import Kernels
from envbuild.image import auditcache
from envbuild.image.layerfacts import LayerFacts

LAYER = "sha256:" + "1" * 64
OTHER = "sha256:" + "2" * 64
FACTS = LayerFacts(
    deleted=frozenset({"usr/lib/libold.so"}),
    opaque=frozenset({"opt/venv"}),
    replaced=frozenset({"usr/bin/python3", "etc/ld.so.conf"}),
    objects={
        "usr/lib/libplain.so": Kernels(sass=(), ptx=()),
        "site-packages/jax_plugins/_linalg.so": Kernels(
            sass=("sm_80", "sm_90a", "sm_100f"), ptx=("compute_120",), size=8_123_456
        ),
    },
    links={"usr/lib64": "lib", "site-packages/libtorch_cuda.so": "/opt/blobs/kernels.bin"},
)


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


def test_what_was_stored_for_a_layer_is_loaded_for_it(cache: Path, cuobjdump: str) -> None:
    assert auditcache.load_layer(LAYER, cuobjdump) is None
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    assert auditcache.load_layer(LAYER, cuobjdump) == FACTS
    assert list(auditcache.load_layer(LAYER, cuobjdump).objects) == list(FACTS.objects)  # order kept
    assert len(entries(cache)) == 1


def test_another_layer_or_another_cuobjdump_misses(cache: Path, cuobjdump: str, tmp_path: Path) -> None:
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    assert auditcache.load_layer(OTHER, cuobjdump) is None
    other = tmp_path / "cuobjdump-12.9"
    other.write_bytes(b"\x7fELF cuobjdump 12.9")
    assert auditcache.load_layer(LAYER, str(other)) is None


def test_a_new_format_reads_afresh(cache: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch) -> None:
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    monkeypatch.setattr(auditcache, "FORMAT", auditcache.FORMAT + 1)
    assert auditcache.load_layer(LAYER, cuobjdump) is None


def _entry(**changes: object) -> bytes:
    entry = {"format": auditcache.FORMAT, "layer": LAYER, "deleted": [], "opaque": [], "replaced": []}
    entry["objects"] = [["a.so", [], [], None, 100]]
    entry["links"] = [["lib64", "lib"]]
    entry.update(changes)
    return json.dumps(entry).encode()


@pytest.mark.parametrize(
    "written",
    [
        b"not json",
        b"[]",
        _entry(objects=None),
        _entry(layer=OTHER),  # another layer's entry under this one's name
        _entry(format=2),
        _entry(objects=[["a.so", "sm_90", [], None, 100]]),
        _entry(objects=[["a.so", ["sm_90;rm -rf /"], [], None, 100]]),
        _entry(objects=[[7, [], [], None, 100]]),
        _entry(objects=[["a.so", [], [], None, 100], ["b.so"]]),
        _entry(objects=[["a.so", [], [], None, -1]]),
        _entry(objects=[["a.so", [], [], None, True]]),
        _entry(deleted="usr/lib"),
        _entry(replaced=["ok", 7]),
        _entry(opaque=["x" * (auditcache.MAX_PATH + 1)]),
        _entry(deleted=["usr/lib/a\0b"]),
        _entry(links=None),  # an entry of format 5 had none: its links were never kept
        _entry(links=[["lib64", ""]]),
        _entry(links=[["lib64", "lib", "more"]]),
        _entry(links=[["lib64", 7]]),
    ],
    ids=[
        "not-json",
        "a-list",
        "no-objects",
        "other-layer",
        "old-format",
        "string-arch",
        "bad-arch",
        "path-not-str",
        "short",
        "negative-size",
        "bool-size",
        "deleted-not-a-list",
        "replaced-not-str",
        "path-too-long",
        "nul-in-path",
        "no-links",
        "empty-link-target",
        "link-too-long",
        "link-target-not-str",
    ],
)
def test_an_entry_that_is_not_what_envbuild_wrote_is_a_miss(
    cache: Path, cuobjdump: str, written: bytes
) -> None:
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    (entry,) = entries(cache)
    assert auditcache.load_layer(LAYER, cuobjdump) == FACTS  # what store_layer wrote reads back...
    entry.write_bytes(written)
    assert auditcache.load_layer(LAYER, cuobjdump) is None  # ...and this does not
    auditcache.store_layer(LAYER, cuobjdump, FACTS)  # the audit that read afresh replaces it
    assert auditcache.load_layer(LAYER, cuobjdump) == FACTS


def test_the_entry_shape_the_bad_ones_depart_from_loads() -> None:
    """The cases above are misses for the one defect each has, not for a shape nothing would load."""
    facts = auditcache._facts(json.loads(_entry()), LAYER)
    assert facts is not None and facts.objects == {"a.so": Kernels(sass=(), ptx=(), size=100)}
    assert facts.links == {"lib64": "lib"}


def test_an_entry_past_the_size_bound_is_not_read(
    cache: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    (entry,) = entries(cache)
    monkeypatch.setattr(auditcache, "MAX_BYTES", entry.stat().st_size - 1)
    assert auditcache.load_layer(LAYER, cuobjdump) is None


def test_layer_ids_that_are_not_sha256_diff_ids_are_never_keyed(cache: Path, cuobjdump: str) -> None:
    for layer in ("sha256:short", "md5:" + "1" * 32, None):
        auditcache.store_layer(layer, cuobjdump, FACTS)  # type: ignore[arg-type]
        assert auditcache.load_layer(layer, cuobjdump) is None  # type: ignore[arg-type]
    assert entries(cache) == []


def test_an_empty_cache_dir_turns_it_off(
    tmp_path: Path, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", "")
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    assert auditcache.load_layer(LAYER, cuobjdump) is None
    assert auditcache.directory() is None


def test_a_cache_that_cannot_be_written_is_skipped(
    mounted, cuobjdump: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only filesystem (a real tmpfs; root's permission bits would not refuse): the audit's
    answer does not depend on the cache, so the store does nothing and says nothing."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(mounted("ro,size=1m")))
    auditcache.store_layer(LAYER, cuobjdump, FACTS)
    assert auditcache.load_layer(LAYER, cuobjdump) is None
