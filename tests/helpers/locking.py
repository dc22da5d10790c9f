"""The project `envbuild lock` tests lock: torch 2.13.0 from one loopback index, user packages from
another, for Python 3.11 on Debian 12."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main


def spec_text(user_url: str, framework_url: str, pip: str = '["app[fast]", "lib==2.0"]') -> str:
    return (
        f'[stack]\ndriver = "580"\nframework = "torch==2.13.0"\npython = "3.11"\nos = "debian12"\n\n'
        f'[packages]\npip = {pip}\nindex-url = "{user_url}"\nframework-index-url = "{framework_url}"\n'
    )


def run_lock(capsys: pytest.CaptureFixture[str], project: Path, *args: str) -> tuple[int, str, str]:
    """`envbuild lock -f project/envbuild.toml ARGS`: (exit code, stdout, stderr)."""
    code = main(["lock", "-f", str(project / "envbuild.toml"), *args])
    out, err = capsys.readouterr()
    return code, out, err
