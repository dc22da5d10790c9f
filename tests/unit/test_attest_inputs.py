"""The record's attestation inputs: which wheel the image installed, with its hash, locked or not."""

from __future__ import annotations

import hashlib
from pathlib import Path

from envbuild.attest.inputs import dependencies
from envbuild.lockfile.model import LockedPackage, LockedTarget


def _context(tmp_path: Path, layer: str, name: str, data: bytes) -> str:
    folder = tmp_path / "wheels" / layer
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _target(*packages: LockedPackage) -> LockedTarget:
    return LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="wheels",
        python="3.11",
        base_image="debian:12@sha256:" + "a" * 64,
        requirements=("six==1.16.0",),
        stack=(),
        packages=packages,
        conda=(),
    )


def test_a_locked_package_names_the_file_the_context_carried_among_its_hashes(tmp_path: Path) -> None:
    installed = _context(tmp_path, "user", "six-1.16.0-py2.py3-none-any.whl", b"the wheel")
    other = "sha256:" + "b" * 64  # the sdist's hash, also allowed by the lock
    locked = LockedPackage(
        name="six",
        version="1.16.0",
        layer="user",
        index="http://127.0.0.1:1/simple",
        hashes=(other, installed),
    )
    (dep,) = dependencies(_target(locked), str(tmp_path))
    assert dep["hashes"] == [other, installed]
    assert dep["file"] == "six-1.16.0-py2.py3-none-any.whl" and dep["file_hash"] == installed
    assert dep["index"] == "http://127.0.0.1:1/simple" and dep["layer"] == "user"


def test_a_locked_package_installed_from_an_index_has_no_file(tmp_path: Path) -> None:
    locked = LockedPackage(
        name="six",
        version="1.16.0",
        layer="user",
        index="https://pypi.org/simple",
        hashes=("sha256:" + "c" * 64,),
    )
    (dep,) = dependencies(_target(locked), str(tmp_path))
    assert dep["file"] is None and dep["file_hash"] is None and dep["hashes"] == ["sha256:" + "c" * 64]


def test_an_unlocked_build_lists_the_contexts_wheels_with_their_own_hashes(tmp_path: Path) -> None:
    torch = _context(tmp_path, "framework", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", b"torch")
    six = _context(tmp_path, "user", "six-1.16.0-py2.py3-none-any.whl", b"six")
    (tmp_path / "wheels" / "user" / "README.txt").write_text("not a wheel")
    found = {d["name"]: d for d in dependencies(None, str(tmp_path))}
    assert set(found) == {"torch", "six"}
    assert found["torch"]["version"] == "2.13.0" and found["torch"]["layer"] == "framework"
    assert found["torch"]["hashes"] == [torch] and found["torch"]["file_hash"] == torch
    assert found["six"]["index"] == "wheelhouse" and found["six"]["file_hash"] == six
