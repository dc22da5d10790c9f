"""The OS step's apt mirror rewrite (issue 38), run by a real shell in the real Debian base: the
command render puts before `apt-get update` turns the one-line sources.list and a deb822 .sources file
into the mirror's, at a path boundary, and leaves other archives alone."""

from __future__ import annotations

import pytest

from envbuild.plan.aptmirror import apt_mirror_command
from envbuild.spec.mirrors import check_entry, make_mirrors
from tests.helpers.docker import docker

pytestmark = pytest.mark.docker

SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://deb.debian.org/debianx
Suites: other
"""


def test_the_rewrite_turns_both_source_forms_into_the_mirrors_in_the_debian_base(bookworm_image: str) -> None:
    mirrors = make_mirrors(
        [
            check_entry("http://deb.debian.org/debian", "https://proxy.internal/debian"),
            check_entry("http://deb.debian.org/debian-security", "https://proxy.internal/debian-security"),
        ]
    )
    command = apt_mirror_command("debian", mirrors)
    script = (
        f"printf '%s' '{SOURCES}' > /etc/apt/sources.list.d/debian.sources && {command} && "
        "cat /etc/apt/sources.list && echo --- && cat /etc/apt/sources.list.d/debian.sources"
    )
    ran = docker("run", "--rm", "--network", "none", bookworm_image, "sh", "-c", script, check=False)
    assert ran.returncode == 0, ran.stderr
    listed, deb822 = ran.stdout.split("---\n")
    assert listed == "deb https://proxy.internal/debian bookworm main\n"
    assert "URIs: https://proxy.internal/debian\n" in deb822
    assert "URIs: https://proxy.internal/debian-security\n" in deb822
    assert "URIs: http://deb.debian.org/debianx\n" in deb822  # not at a path boundary: left alone
    assert "deb.debian.org/debian\n" not in deb822
