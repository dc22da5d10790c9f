"""The OS step's apt archives through a site's mirrors: the `sed` that rewrites the image's apt
sources before its `apt-get update`.

Only the archives an OS family's images name are rewritten (Debian: deb.debian.org and
security.debian.org; Ubuntu: archive, security and ports.ubuntu.com), and only by a [mirrors] entry
whose source is one of them (or a prefix of one), so a PyPI or conda mirror changing never changes
the OS step's text, and its cached layer is kept. Both the one-line `sources.list` form and the
deb822 `.sources` form (Debian 12+, Ubuntu 24.04+) name the archive by its URL, so one rewrite of
the URL at a path boundary serves both.

What reaches the Dockerfile: a mirror checked by spec.mirrors (http(s), a host, plain path
segments: no quote, no `#`, no `&`, no backslash), so the `#`-delimited sed expression needs only its
regex characters escaped, and the whole command is shell-quoted by the template.
"""

from __future__ import annotations

import re

from envbuild.spec.mirrors import Mirrors

# the archives each family's official images list in their apt sources, as they write them
APT_ARCHIVES = {
    "debian": (
        "http://deb.debian.org/debian",
        "http://deb.debian.org/debian-security",
        "http://security.debian.org/debian-security",
    ),
    "ubuntu": (
        "http://archive.ubuntu.com/ubuntu",
        "http://security.ubuntu.com/ubuntu",
        "http://ports.ubuntu.com/ubuntu-ports",
    ),
}
_ERE_SPECIAL = re.compile(r"([.+*?^$()\[\]{}|\\])")
SOURCE_FILES = "/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources"


def apt_rewrites(family: str, mirrors: Mirrors) -> tuple[tuple[str, str], ...]:
    """(archive, its mirror) for each of the family's archives a [mirrors] entry covers, in the
    family's order; () when none does (and the OS step renders as it always has)."""
    found = []
    for archive in APT_ARCHIVES.get(family, ()):
        for form in (archive, "https://" + archive.removeprefix("http://")):
            if mirrors.url_entry(form) is not None:
                found.append((archive, mirrors.url(form)))
                break
    return tuple(found)


def sed_expressions(rewrites: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """One `sed -E` substitution per archive: its URL (http or https) at a path boundary (a slash,
    a space, the end of the line) becomes the mirror's."""
    out = []
    for archive, mirror in rewrites:
        where = _ERE_SPECIAL.sub(r"\\\1", archive.removeprefix("http://"))
        out.append(f"s#https?://{where}(/|[[:space:]]|$)#{mirror}\\1#g")
    return tuple(out)


def apt_mirror_command(family: str, mirrors: Mirrors) -> str:
    """The shell command that rewrites the image's apt sources ("" when no mirror applies). Each
    expression is single-quoted: its text is checked above to hold no quote."""
    expressions = sed_expressions(apt_rewrites(family, mirrors))
    if not expressions:
        return ""
    for expression in expressions:  # the values are checked where they are read; this is the Dockerfile
        if "'" in expression or "\n" in expression:
            raise ValueError(f"an apt mirror expression holds a quote or a newline: {expression!r}")
    script = " ".join(f"-e '{e}'" for e in expressions)
    return f'for f in {SOURCE_FILES}; do if [ -f "$f" ]; then sed -i -E {script} "$f"; fi; done'
