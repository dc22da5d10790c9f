"""`envbuild lock` against real services on loopback: two package indexes (the spec's, and a separate
"framework index" serving the torch CPU wheel) and, for digests, a real registry.

The base image is given with its digest in most tests (no registry needed); the Docker test at the
end locks against the registry on 127.0.0.1, renders, and builds with a tampered hash.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.read import load_lock
from tests.helpers.locking import run_lock, spec_text
from tests.helpers.paths import MATRIX_DIR

BASE = "debian:bookworm-slim@sha256:" + "a" * 64


@pytest.fixture
def project(tmp_path: Path, indexes) -> Path:
    user, framework = indexes
    (tmp_path / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    return tmp_path


def test_lock_pins_both_layers_with_their_indexes(capsys, project: Path, indexes, user_wheels: Path) -> None:
    user, framework = indexes
    code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 0, err
    locked, intact = load_lock(str(project / "envbuild.lock"))
    assert intact
    (target,) = locked.targets
    packages = {p.name: p for p in target.packages}
    assert packages["torch"].version.startswith("2.13.0") and packages["torch"].layer == "framework"
    assert packages["torch"].index == framework.url
    assert {"filelock", "sympy", "networkx"} <= {n for n, p in packages.items() if p.layer == "framework"}
    assert packages["lib"].version == "2.0" and packages["lib"].index == user.url
    assert {"app", "lib", "base", "linuxonly", "speedup"} <= set(packages)
    assert "winonly" not in packages  # markers evaluated for linux x86_64, the target
    served = hashlib.sha256((user_wheels / "linuxonly-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    assert packages["linuxonly"].hashes == (f"sha256:{served}",)
    assert target.base_image == BASE
    assert dict(target.stack)["framework_version"] == "2.13.0"
    assert "default: locked" in out


def test_lock_is_byte_stable(capsys, project: Path) -> None:
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    first = (project / "envbuild.lock").read_bytes()
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    assert (project / "envbuild.lock").read_bytes() == first
    assert b"created" not in first and b"time" not in first


def test_check_warns_when_the_base_image_is_past_end_of_life(
    capsys, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eol_base = "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04@sha256:" + "a" * 64
    assert run_lock(capsys, project, "--base-image", eol_base)[0] == 0
    monkeypatch.setenv("ENVBUILD_TODAY", "2026-11-29")  # R535, and so CUDA 12.2 images, ended 2026-06
    code, out, err = run_lock(capsys, project, "--check", "--base-image", eol_base)
    assert code == 0 and "matches" in out  # the lock is current: the warning does not fail CI
    assert (
        "warning: target default: base image nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04 is past end of "
        in err
    )
    assert "(due 2026-12-30)" in err
    assert "fix: move to the nearest supported release nvidia/cuda:13.0.2-cudnn-runtime-ubuntu22.04" in err
    monkeypatch.setenv("ENVBUILD_TODAY", "2025-01-01")
    code, _, err = run_lock(capsys, project, "--check", "--quiet", "--base-image", eol_base)
    assert code == 0 and err == ""  # --quiet: no progress lines, and no warning to give


def test_check_passes_then_catches_spec_matrix_and_hand_edits(
    capsys, project: Path, tmp_path: Path, indexes
) -> None:
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    code, out, _ = run_lock(capsys, project, "--check")
    assert code == 0 and "matches" in out

    spec = project / "envbuild.toml"
    original = spec.read_text()
    user, framework = indexes
    spec.write_text(spec_text(user.url, framework.url, '["app[fast]", "lib==2.0", "base"]'))
    code, _, err = run_lock(capsys, project, "--check")
    assert code == 1 and "envbuild.toml changed" in err and "requirement added: base" in err
    spec.write_text(original)

    matrix = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, matrix)
    (matrix / "gpus.toml").write_text((matrix / "gpus.toml").read_text() + "\n# a reviewed edit\n")
    code, _, err = run_lock(capsys, project, "--check", "--matrix", str(matrix))
    assert code == 1 and "matrix changed" in err

    path = project / "envbuild.lock"
    text = path.read_text()
    digest = text.split('"sha256:', 4)[4][:64]  # a package hash (after the three header digests)
    path.write_text(text.replace(digest, "0" * 64, 1))
    code, _, err = run_lock(capsys, project, "--check")
    assert code == 1 and "edited by hand" in err

    path.write_text("lock-version = 1\n[[target]]\n")
    code, _, err = run_lock(capsys, project, "--check")
    assert code == 1 and "malformed" in err


def test_relock_keeps_pins_and_reports_changes(capsys, project: Path, indexes) -> None:
    user, framework = indexes
    spec = project / "envbuild.toml"
    spec.write_text(spec_text(user.url, framework.url, '["lib==1.0"]'))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    spec.write_text(spec_text(user.url, framework.url, '["lib==2.0"]'))
    code, out, _ = run_lock(capsys, project, "--base-image", BASE)
    assert code == 0
    assert "+base 1.0" in out and "lib 1.0 -> 2.0" in out


def test_render_uses_the_lock(capsys, project: Path) -> None:
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    out = project / "build"
    assert main(["render", "-f", str(project / "envbuild.toml"), "-o", str(out)]) == 0
    capsys.readouterr()
    dockerfile = (out / "default" / "Dockerfile").read_text()
    assert f"FROM {BASE}" in dockerfile
    assert dockerfile.count("--require-hashes --no-deps") == 2
    framework = (out / "default" / "requirements-framework.txt").read_text()
    assert "torch==2.13.0" in framework and "--hash=sha256:" in framework
    user = (out / "default" / "requirements.txt").read_text()
    assert "lib==2.0" in user and "torch" not in user


def test_render_refuses_a_stale_lock(capsys, project: Path, indexes) -> None:
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    user, framework = indexes
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url, '["lib==1.0"]'))
    assert main(["render", "-f", str(project / "envbuild.toml"), "-o", str(project / "b")]) == 1
    assert "does not match" in capsys.readouterr().err


def test_unresolvable_requirement_is_a_clear_error(capsys, project: Path, indexes) -> None:
    user, framework = indexes
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url, '["lib==9.9"]'))
    code, _, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 1
    assert "the resolver found no set of versions for lib==9.9 while locking target default, user" in err
    assert "fix: relax the pins named above" in err  # a real conflict: the pins are the fix
    assert "could not reach" not in err
    assert not (project / "envbuild.lock").exists()


# --- real registry and engine: the digest in the lock, and a tampered hash failing the build


def test_pylock_export_is_pep_751(capsys, project: Path, indexes) -> None:
    from envbuild._util import toml as _toml

    code, _, err = run_lock(capsys, project, "--base-image", BASE, "--pylock")
    assert code == 0, err
    data = _toml.loads((project / "pylock.default.toml").read_text())
    assert data["lock-version"] == "1.0" and data["created-by"] == "envbuild"
    locked, _ = load_lock(str(project / "envbuild.lock"))
    expected = {p.name: (p.version, p.index, set(p.hashes)) for p in locked.targets[0].packages}
    assert {p["name"] for p in data["packages"]} == set(expected)
    for package in data["packages"]:
        version, index, hashes = expected[package["name"]]
        assert package["version"] == version and package["index"] == index
        for wheel in package["wheels"]:
            assert f"sha256:{wheel['hashes']['sha256']}" in hashes
            assert wheel["url"].startswith("http://127.0.0.1:")
