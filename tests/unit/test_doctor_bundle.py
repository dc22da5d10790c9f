"""`envbuild doctor --bundle`: refused before any check runs (exit 2) when there is no bundle directory
or no lock to judge it against; and the base-image platform checks against a binfmt_misc directory of
the test's own (an enabled QEMU handler, a disabled one, none), as the host's /proc would hold it."""

from __future__ import annotations

from pathlib import Path

from envbuild.cli.app import main
from envbuild.host.bundlecheck import platform_checks
from envbuild.lockfile.model import LockedTarget
from tests.helpers.paths import EXAMPLES

SPEC = EXAMPLES / "torch-wheels" / "envbuild.toml"


def entry(platform: str, base: str = "debian:12@sha256:" + "a" * 64) -> LockedTarget:
    return LockedTarget(
        name="default",
        platform=platform,
        strategy="wheels",
        python="3.11",
        base_image=base,
        requirements=(),
        stack=(),
        packages=(),
        conda=(),
    )


def test_a_bundle_without_a_lock_is_a_usage_error(capsys, tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(SPEC.read_text())
    (tmp_path / "bundle").mkdir()
    assert main(["doctor", "--no-gpu", "--bundle", str(tmp_path / "bundle"), "-f", str(spec)]) == 2
    out, err = capsys.readouterr()
    assert f"is judged against a lock, and {tmp_path / 'envbuild.lock'} does not exist" in err
    assert f"envbuild lock -f {spec}" in err and "--lock PATH" in err
    assert out == "" and "Traceback" not in err  # refused before any check ran


def test_a_bundle_that_is_not_a_directory_is_a_usage_error(capsys, tmp_path: Path) -> None:
    assert main(["doctor", "--no-gpu", "--bundle", str(tmp_path / "nowhere")]) == 2
    out, err = capsys.readouterr()
    assert f"--bundle {tmp_path / 'nowhere'} is not a directory (it does not exist)" in err
    assert "envbuild vendor" in err and out == ""


def test_the_host_s_own_platform_runs_natively(tmp_path: Path) -> None:
    (check,) = platform_checks([entry("linux/amd64")], machine="x86_64", binfmt=str(tmp_path))
    assert check.name == "bundle base linux/amd64" and check.status == "ok"
    assert "runs natively on this x86_64 host" in check.evidence


def test_another_platform_runs_under_an_enabled_qemu_handler(tmp_path: Path) -> None:
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    base = "arm64v8/debian:12@sha256:" + "b" * 64
    (check,) = platform_checks([entry("linux/arm64", base)], machine="x86_64", binfmt=str(tmp_path))
    assert check.status == "ok"
    assert base in check.evidence and "QEMU" in check.evidence and "no GPU" in check.evidence


def test_another_platform_without_an_enabled_handler_warns(tmp_path: Path) -> None:
    (tmp_path / "qemu-aarch64").write_text("disabled\n")
    entries = [entry("linux/arm64"), entry("linux/amd64"), entry("linux/arm64")]
    checks = platform_checks(entries, machine="x86_64", binfmt=str(tmp_path))
    assert [c.name for c in checks] == ["bundle base linux/arm64", "bundle base linux/amd64"]
    arm, amd = checks
    assert arm.status == "warn" and amd.status == "ok"
    assert str(tmp_path / "qemu-aarch64") in arm.evidence and "missing or disabled" in arm.evidence
    assert arm.fix and "build it on a linux/arm64 host" in arm.fix and "qemu-user-static" in arm.fix
