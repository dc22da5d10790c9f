"""[mirrors] and [site] in envbuild.toml: the prefix rules, their inverse, and the reader's errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import UsageError
from envbuild.spec.mirrors import check_entry, make_mirrors
from envbuild.spec.model import load_spec

BASE = '[stack]\ndriver = "550"\nframework = "torch"\n'


def test_url_prefix_rewrites_at_a_path_boundary_and_back() -> None:
    table = make_mirrors(
        [
            check_entry("https://download.pytorch.org/whl", "https://proxy.internal/pytorch/whl/"),
            check_entry("https://download.pytorch.org", "https://other.internal"),
        ]
    )
    assert table.url("https://download.pytorch.org/whl/cu124") == "https://proxy.internal/pytorch/whl/cu124"
    assert table.url("https://download.pytorch.org/whlx") == "https://other.internal/whlx"  # the shorter one
    assert table.url("https://pypi.org/simple") == "https://pypi.org/simple"
    for url in ("https://download.pytorch.org/whl/cu124", "https://download.pytorch.org/whlx/a"):
        assert table.canonical_url(table.url(url)) == url


def test_image_prefix_matches_dockers_normalised_name_and_keeps_tag_and_digest() -> None:
    table = make_mirrors([check_entry("nvidia/cuda", "registry.internal/nvidia/cuda")])
    digest = "sha256:" + "a" * 64
    assert table.image("nvidia/cuda:12.4.1-runtime-ubuntu22.04") == (
        "registry.internal/nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    )
    mirrored = table.image(f"docker.io/nvidia/cuda:12.4@{digest}")
    assert mirrored == f"registry.internal/nvidia/cuda:12.4@{digest}"
    assert table.image("nvidia/cudax:1") == "nvidia/cudax:1"
    assert table.image("ubuntu:22.04") == "ubuntu:22.04"
    assert table.canonical_image("registry.internal/nvidia/cuda:12.4") == "docker.io/nvidia/cuda:12.4"


def test_a_whole_registry_is_mirrored() -> None:
    table = make_mirrors([check_entry("docker.io", "127.0.0.1:5000/hub")])
    assert table.image("ubuntu:22.04") == "127.0.0.1:5000/hub/library/ubuntu:22.04"
    assert table.image("nvcr.io/nvidia/pytorch:24.01-py3") == "nvcr.io/nvidia/pytorch:24.01-py3"


@pytest.mark.parametrize(
    ("source", "mirror", "words"),
    [
        ("https://pypi.org/simple", "https://me:pw@proxy/simple", "credentials never go"),
        ("https://pypi.org/simple", "registry.internal/x", "both must be of one kind"),
        ("https://pypi.org/simple?x=1", "https://proxy/simple", "is not a URL or image-name prefix"),
        ("nvidia/cuda", "Registry Internal", "is not a URL or image-name prefix"),
    ],
)
def test_a_bad_entry_says_what_is_accepted(source: str, mirror: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_entry(source, mirror)


def test_the_spec_reads_mirrors_and_site(tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(
        BASE + '[mirrors]\n"https://pypi.org/simple" = "http://127.0.0.1:9/simple"\n'
        '[site]\nmatrix = "team-matrix"\nbase-image = "registry.internal/cuda:12.4.1-base-ubuntu22.04"\n'
    )
    read = load_spec(str(spec))
    assert read.mirrors.url("https://pypi.org/simple/six/") == "http://127.0.0.1:9/simple/six/"
    assert read.site.matrix == str(tmp_path / "team-matrix")
    assert read.site.base_image == "registry.internal/cuda:12.4.1-base-ubuntu22.04"
    spec.write_text(BASE)
    assert not load_spec(str(spec)).mirrors
    assert load_spec(str(spec)).site.matrix is None


def test_the_spec_names_every_bad_mirror_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(
        BASE + '[mirrors]\n"nvidia/cuda" = "a.io/cuda"\n"docker.io/nvidia/cuda" = "b.io/cuda"\n'
        '"https://x.org" = 3\n[site]\nmatrics = "m"\n'
    )
    with pytest.raises(UsageError) as caught:
        load_spec(str(spec))
    message = caught.value.message + (caught.value.fix or "")
    assert "names the same source as 'nvidia/cuda'" in message
    assert "the mirror must be a string" in message
    assert "did you mean 'matrix'" in message
