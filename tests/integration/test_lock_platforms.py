"""`envbuild lock` for linux/arm64 and for targets built for several platforms (issue 19).

A real aarch64 lock against a loopback index of the real jax[cuda12-local] 0.10.2 aarch64 wheels
(the arm64 wheelhouse); the per-platform tests serve small wheels tagged x86_64 and aarch64
(tests/helpers/platformwheels.py), so the two platforms get different files; the base image is
pinned per platform from a real multi-platform index in the registry on loopback.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild._testing.pyindex import PackageIndex, build_wheel
from envbuild.lockfile.read import load_lock, read_lock
from tests.helpers.locking import forge, run_lock
from tests.helpers.platformwheels import build_platform_wheel, sha256_of
from tests.helpers.registry import upload_index

# the matrix's base for jax 0.10.2 cuda12 on Ubuntu 22.04, pinned, so no registry is asked
BASE = "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu22.04@sha256:" + "a" * 64
BOTH = '["linux/amd64", "linux/arm64"]'


def jax_spec(framework_url: str, user_url: str, platform: str, pip: str = '["gateway"]') -> str:
    """jax 0.10.2 on the CUDA 12 base image (jax[cuda12-local]: no nvidia-* wheels), Python 3.11."""
    value = platform if platform.startswith("[") else f'"{platform}"'
    return (
        '[stack]\ndriver = "580"\nframework = "jax==0.10.2"\nstrategy = "base-image"\ncuda = "12"\n'
        f'python = "3.11"\nos = "ubuntu22.04"\npython-source = "deadsnakes"\nplatform = {value}\n\n'
        f'[packages]\npip = {pip}\nindex-url = "{user_url}"\nframework-index-url = "{framework_url}"\n'
    )


def user_wheels(directory: Path) -> Path:
    """gateway pulls armside on aarch64 and x86side on x86_64 (PEP 508 platform_machine)."""
    build_wheel(
        directory,
        "gateway",
        "1.0",
        ['armside; platform_machine == "aarch64"', 'x86side; platform_machine == "x86_64"'],
    )
    for name in ("armside", "x86side", "tool"):
        build_wheel(directory, name, "1.0")
    return directory


def small_jax(directory: Path) -> Path:
    """jax 0.10.2 with jaxlib and jax-cuda12-plugin built once per machine: each platform has its
    own files, as on PyPI, in a few kilobytes."""
    build_wheel(
        directory, "jax", "0.10.2", ["jaxlib==0.10.2"], extras={"cuda12-local": ["jax-cuda12-plugin==0.10.2"]}
    )
    for machine in ("x86_64", "aarch64"):
        build_platform_wheel(directory, "jaxlib", "0.10.2", machine)
        build_platform_wheel(directory, "jax-cuda12-plugin", "0.10.2", machine)
    return directory


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PackageIndex, PackageIndex, Path]]:
    """(the small framework index, the user index, the project directory)."""
    project = tmp_path / "project"
    project.mkdir()
    with (
        PackageIndex(small_jax(tmp_path / "framework")) as framework,
        PackageIndex(user_wheels(tmp_path / "user")) as user,
    ):
        yield framework, user, project


def entries(project: Path) -> dict[str, dict[str, object]]:
    """{platform: {package: LockedPackage}} of the one target, plus its base under "base"."""
    lock, intact = load_lock(str(project / "envbuild.lock"))
    assert intact
    assert {t.name for t in lock.targets} == {"default"}
    return {t.platform: {"base": t.base_image, **{p.name: p for p in t.packages}} for t in lock.targets}


def check_json(capsys: pytest.CaptureFixture[str], project: Path, *extra: str) -> tuple[int, dict]:
    code, out, _ = run_lock(capsys, project, "--check", "--json", *extra)
    return code, json.loads(out)


# --- (a) a real aarch64 lock ------------------------------------------------------------------------


def test_a_real_aarch64_lock_hashes_the_aarch64_wheels_and_evaluates_markers_for_aarch64(
    capsys, tmp_path: Path, arm64_wheelhouse: Path
) -> None:
    with PackageIndex(arm64_wheelhouse) as framework, PackageIndex(user_wheels(tmp_path / "user")) as user:
        (tmp_path / "envbuild.toml").write_text(jax_spec(framework.url, user.url, "linux/arm64"))
        code, out, err = run_lock(capsys, tmp_path, "--base-image", BASE)
    assert code == 0, err
    text = (tmp_path / "envbuild.lock").read_text()
    assert 'platform = "linux/arm64"' in text
    (only,) = entries(tmp_path).values()
    served = {sha256_of(path): path.name for path in arm64_wheelhouse.glob("*.whl")}
    framework = {n: p for n, p in only.items() if n != "base" and p.layer == "framework"}
    assert {"jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "numpy", "scipy"} <= set(framework)
    for package in framework.values():
        (digest,) = package.hashes  # one file per package: that platform's wheel only
        assert digest in served, (package.name, digest)
        assert "x86_64" not in served[digest] and "win" not in served[digest]
    assert served[only["jaxlib"].hashes[0]].endswith("_aarch64.whl")
    assert served[only["jax-cuda12-plugin"].hashes[0]].endswith("_aarch64.whl")
    assert not any(n.startswith("nvidia-") for n in framework)  # cuda12-local: the image's CUDA
    assert "armside" in only and "x86side" not in only  # platform_machine == "aarch64"
    assert only["base"] == BASE
    assert "target default (linux/arm64): framework layer" in err
    assert "default (linux/arm64): locked" in out


# --- (b) a two-platform target ----------------------------------------------------------------------


def test_a_two_platform_target_has_an_entry_per_platform_with_its_own_wheels(capsys, served) -> None:
    framework, user, project = served
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, BOTH))
    code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 0, err
    found = entries(project)
    assert list(found) == ["linux/amd64", "linux/arm64"]  # the spec's order
    amd, arm = found["linux/amd64"], found["linux/arm64"]
    wheels = Path(framework.directory)
    for name, stem in (("jaxlib", "jaxlib"), ("jax-cuda12-plugin", "jax_cuda12_plugin")):
        assert amd[name].hashes == (
            sha256_of(wheels / f"{stem}-0.10.2-cp311-cp311-manylinux_2_28_x86_64.whl"),
        )
        assert arm[name].hashes == (
            sha256_of(wheels / f"{stem}-0.10.2-cp311-cp311-manylinux_2_28_aarch64.whl"),
        )
    assert amd["jax"].hashes == arm["jax"].hashes  # py3-none-any: one file for both
    assert "x86side" in amd and "armside" not in amd
    assert "armside" in arm and "x86side" not in arm
    for line in ("default (linux/amd64): locked", "default (linux/arm64): locked"):
        assert line in out
    assert "target default (linux/arm64): user layer" in err

    # PEP 751 export: a file per platform, each for its own machine and with its own wheels
    code, out, err = run_lock(capsys, project, "--base-image", BASE, "--pylock")
    assert code == 0, err
    for arch, machine in (("amd64", "x86_64"), ("arm64", "aarch64")):
        pylock = (project / f"pylock.default-{arch}.toml").read_text()
        assert f"platform_machine == '{machine}'" in pylock
        assert f"manylinux_2_28_{machine}.whl" in pylock
        assert "manylinux_2_28_" + ("aarch64" if machine == "x86_64" else "x86_64") not in pylock
    assert not (project / "pylock.default.toml").exists()

    # unchanged: the no-op relock stays a no-op, entries and all
    before = (project / "envbuild.lock").stat().st_mtime_ns
    code, out, err = run_lock(capsys, project, "--base-image", BASE)
    assert code == 0 and "up to date" in out and "(1 target)" in out, err
    assert (project / "envbuild.lock").stat().st_mtime_ns == before

    # --upgrade PKG moves it on every platform
    build_wheel(Path(user.directory), "tool", "2.0")
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, BOTH, '["gateway", "tool"]'))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    build_wheel(Path(user.directory), "tool", "3.0")
    code, out, err = run_lock(capsys, project, "--base-image", BASE, "--upgrade", "tool")
    assert code == 0, err
    assert {p: e["tool"].version for p, e in entries(project).items()} == {
        "linux/amd64": "3.0",
        "linux/arm64": "3.0",
    }
    assert "default (linux/arm64): tool 2.0 -> 3.0" in out


# --- (c) the base image's platform manifest ---------------------------------------------------------


def test_each_platform_pins_its_own_manifest_from_the_base_index(
    capsys, served, anonymous_registry: str
) -> None:
    framework, user, project = served
    repo = f"envbuild-test/lock-platforms-{uuid.uuid4().hex[:8]}"
    index, manifests = upload_index(anonymous_registry, repo, "12.9", ("linux/amd64", "linux/arm64"))
    ref = f"{anonymous_registry}/{repo}:12.9"
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, BOTH))
    code, _, err = run_lock(capsys, project, "--base-image", ref)
    assert code == 0, err
    found = entries(project)
    assert found["linux/amd64"]["base"] == f"{ref}@{manifests['linux/amd64']}"
    assert found["linux/arm64"]["base"] == f"{ref}@{manifests['linux/arm64']}"
    assert index not in (project / "envbuild.lock").read_text()  # never the index: per platform


def test_a_base_index_without_the_platform_is_a_lock_error_naming_what_it_has(
    capsys, served, anonymous_registry: str
) -> None:
    framework, user, project = served
    repo = f"envbuild-test/lock-platforms-{uuid.uuid4().hex[:8]}"
    upload_index(anonymous_registry, repo, "amd64-only", ("linux/amd64",))
    ref = f"{anonymous_registry}/{repo}:amd64-only"
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, "linux/arm64"))
    code, _, err = run_lock(capsys, project, "--base-image", ref)
    assert code == 1
    assert (
        f"target default (linux/arm64): base image {ref} is an image index without a linux/arm64 manifest"
        in err
    )
    assert "it has linux/amd64" in err and "fix: use a base image published for linux/arm64" in err
    assert "Traceback" not in err
    assert not (project / "envbuild.lock").exists()


def test_an_arm64_v8_entry_is_arm64_and_a_single_amd64_image_is_refused_for_arm64(
    capsys, served, anonymous_registry: str
) -> None:
    framework, user, project = served
    repo = f"envbuild-test/lock-platforms-{uuid.uuid4().hex[:8]}"
    _, manifests = upload_index(anonymous_registry, repo, "v8", ("linux/amd64", "linux/arm64/v8"))
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, "linux/arm64"))
    code, _, err = run_lock(capsys, project, "--base-image", f"{anonymous_registry}/{repo}:v8")
    assert code == 0, err
    assert entries(project)["linux/arm64"]["base"].endswith(f"@{manifests['linux/arm64/v8']}")

    upload_index(anonymous_registry, repo, "single", ("linux/amd64",), index=False)
    (project / "envbuild.lock").unlink()
    code, _, err = run_lock(capsys, project, "--base-image", f"{anonymous_registry}/{repo}:single")
    assert code == 1
    assert f"{repo}:single is a single-platform image for linux/amd64, not linux/arm64" in err
    assert not (project / "envbuild.lock").exists()


# --- (d) lock --check -------------------------------------------------------------------------------


def test_check_names_an_added_and_a_dropped_platform(capsys, served) -> None:
    framework, user, project = served
    spec = project / "envbuild.toml"
    spec.write_text(jax_spec(framework.url, user.url, "linux/arm64"))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    assert check_json(capsys, project)[0] == 0

    spec.write_text(jax_spec(framework.url, user.url, BOTH))  # linux/amd64 added
    code, document = check_json(capsys, project, "--offline")
    assert code == 1
    (added,) = [p for p in document["problems"] if p["kind"] == "target"]
    assert added["target"] == "default" and added["platform"] == "linux/amd64"
    assert added["field"] == "platform" and added["wanted"] == "linux/amd64"
    assert added["message"] == (
        "target 'default' is in the spec for linux/amd64 but not locked for it (locked for linux/arm64)"
    )
    code, _, err = run_lock(capsys, project, "--check", "--offline")
    assert code == 1 and "not locked for it" in err

    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0  # relocked: two entries
    spec.write_text(jax_spec(framework.url, user.url, "linux/amd64"))  # linux/arm64 dropped
    code, document = check_json(capsys, project, "--offline")
    assert code == 1
    (dropped,) = [p for p in document["problems"] if p["kind"] == "target"]
    assert dropped["platform"] == "linux/arm64" and dropped["locked"] == "linux/arm64"
    assert "is locked for linux/arm64, which the spec no longer builds it for" in dropped["message"]


def test_check_catches_a_hand_edited_arm64_hash_and_base_digest(capsys, served) -> None:
    framework, user, project = served
    (project / "envbuild.toml").write_text(jax_spec(framework.url, user.url, BOTH))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    path = project / "envbuild.lock"
    original = path.read_text()
    lock = read_lock(str(path)).lock
    amd, arm = lock.targets
    assert arm.platform == "linux/arm64"
    jaxlib = next(p for p in arm.packages if p.name == "jaxlib")
    forged = jaxlib.replace(hashes=("sha256:" + "0" * 64,))
    packages = tuple(forged if p is jaxlib else p for p in arm.packages)
    path.write_text(forge(lock.replace(targets=(amd, arm.replace(packages=packages)))))  # digest recomputed
    code, document = check_json(capsys, project)
    assert code == 1
    stale = [p for p in document["problems"] if p["kind"] == "stale" and p["package"] == "jaxlib"]
    assert stale == [
        {
            "kind": "stale",
            "target": "default",
            "platform": "linux/arm64",
            "field": "hashes",
            "package": "jaxlib",
            "locked": "sha256:" + "0" * 64,
            "wanted": jaxlib.hashes[0],
            "message": f"target 'default' (linux/arm64): package jaxlib: hashes sha256:{'0' * 64} -> "
            f"{jaxlib.hashes[0]}",
        }
    ]

    # the arm64 entry's base digest edited by hand: the seal names it
    head, line, tail = original.rpartition(f'base-image = "{arm.base_image}"')  # the last entry's
    edited = head + line.replace("a" * 64, "b" * 64) + tail
    assert edited != original and original.index(line) < len(head)  # amd64's line is untouched
    path.write_text(edited)
    code, document = check_json(capsys, project, "--offline")
    assert code == 1
    assert (
        document["problems"][0]["kind"] == "seal" and "edited by hand" in document["problems"][0]["message"]
    )


# --- one rule for a target's platforms (issue 35 item 2): the spec's, each with its own lock entry


def test_build_for_a_platform_the_lock_lacks_fails_before_anything_is_built(capsys, served) -> None:
    """The lock's drift check refuses it first (the spec's platforms changed); behind it, build and
    render share plan.builds' rule, so neither can build one platform from another's entry."""
    from envbuild.cli.app import main

    framework, user, project = served
    spec = project / "envbuild.toml"
    spec.write_text(jax_spec(framework.url, user.url, "linux/arm64"))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    spec.write_text(jax_spec(framework.url, user.url, BOTH))  # linux/amd64 added, not locked
    out = project / "build"
    for command in (["build", "--output", str(out)], ["render", "--output", str(out)]):
        code = main([*command, "-f", str(spec)])
        _, err = capsys.readouterr()
        assert code == 1, (command, err)
        assert "does not match" in err and "run `envbuild lock`" in err, err
        assert "Traceback" not in err
        assert not out.exists(), command  # nothing rendered, nothing built


def test_the_build_list_refuses_a_platform_the_lock_lacks_and_never_borrows_another(capsys, served) -> None:
    """plan.builds.builds, which render, build and bake all call: each of the spec's platforms
    gets its own entry or a LockError naming what the lock has; no other platform's entry."""
    from envbuild.errors import LockError
    from envbuild.matrix.load import load_matrix
    from envbuild.plan.builds import builds
    from envbuild.spec.model import load_spec

    framework, user, project = served
    spec_path = project / "envbuild.toml"
    spec_path.write_text(jax_spec(framework.url, user.url, "linux/arm64"))
    assert run_lock(capsys, project, "--base-image", BASE)[0] == 0
    lock, intact = load_lock(str(project / "envbuild.lock"))
    assert intact
    matrix = load_matrix()
    spec = load_spec(str(spec_path))
    (build,) = builds(matrix, spec, lock)
    assert (build.platform, build.locked.platform) == ("linux/arm64", "linux/arm64")
    spec_path.write_text(jax_spec(framework.url, user.url, BOTH))
    both = load_spec(str(spec_path))
    with pytest.raises(LockError, match=r"is locked for linux/arm64, not for linux/amd64") as raised:
        builds(matrix, both, lock)
    assert "envbuild lock" in raised.value.fix
