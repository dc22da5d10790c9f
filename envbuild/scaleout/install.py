"""Where a CI job installs envbuild from: the `--install` of `ci github` and `ci gitlab`, or a default
that exists.

envbuild is not published on PyPI, so `pip install envbuild==VERSION` on a fresh runner installs
nothing (or someone else's project of that name). The default is therefore where the envbuild running
the generator came from, as pip recorded it (PEP 610 direct_url.json): a git URL pinned to the commit
it was built from, an https archive, or, when pip recorded no direct URL, the index it was installed
from, where `envbuild==VERSION` exists. A local path or an editable checkout is on no runner, so then
the user has to say: a usage error asking for --install.

An --install value lands in a `run:`/`script:` line as one shell-quoted word; it is also checked here
so that it is one pip argument that names envbuild, carries no shell metacharacters (which quoting
would keep harmless, but which are never part of a real source) and no credentials, which would be
committed with the workflow.
"""

from __future__ import annotations

import re

from envbuild._util.jsontext import parse_json
from envbuild.errors import UsageError
from envbuild.spec.validate import reject_metacharacters, reject_unsafe_text

FLAG = "--install"
EXAMPLES = (
    "--install 'git+https://github.com/YOUR-ORG/envbuild@v0.1.0'",
    "--install envbuild==0.1.0 (from your own package index)",
    "--install ./tools/envbuild-0.1.0-py3-none-any.whl (a path in the repository)",
)
_FIX = "pass where CI installs envbuild from, e.g. " + "; ".join(EXAMPLES)
_URL_RE = re.compile(r"^(git\+)?(https|ssh)://[A-Za-z0-9._~%/+@:=#&-]+$")
_PATH_RE = re.compile(r"^(\.{1,2}/|/)?[A-Za-z0-9._+@=-][A-Za-z0-9._+@=/-]*$")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SHELL = set("|&;()$`\\\"' \t*?[]{}")  # < > ! ~ = , belong to version specifiers


def install_source(value: str | None) -> str:
    """The pip argument CI installs envbuild with: `value` checked, or the default (default_install)."""
    if value is None:
        return default_install(installed_origin(), _version())
    return check_install(value)


def check_install(value: str) -> str:
    """`value` when it is one pip argument naming envbuild: a requirement, a URL or a path."""
    try:
        reject_metacharacters(value)
        reject_unsafe_text(value)
    except ValueError as exc:
        raise UsageError(f"{FLAG} {value!r} {exc}", fix=_FIX) from None
    if not value.strip() or value.startswith("-"):
        raise UsageError(
            f"{FLAG} {value!r} is not a source to install envbuild from (options for pip are not accepted)",
            fix=_FIX,
        )
    shell = sorted(set(value) & _SHELL - {" ", "@"} if " @ " in value else set(value) & _SHELL)
    if shell:
        raise UsageError(
            f"{FLAG} {value!r} contains {', '.join(map(repr, shell))}: {FLAG} is one pip argument (a "
            "requirement, a URL or a path), and no such argument holds shell metacharacters or spaces",
            fix=_FIX,
        )
    if _SCHEME_RE.match(value):
        if not _URL_RE.fullmatch(value):
            raise UsageError(f"{FLAG} {value!r} is not an https/ssh (or git+) URL pip can read", fix=_FIX)
        return value
    if " @ " not in value and ("/" in value or value in (".", "..")):
        if not _PATH_RE.fullmatch(value):
            raise UsageError(
                f"{FLAG} {value!r} is not a plain path (letters, digits, . _ + @ = - and /)", fix=_FIX
            )
        return value
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(value)
    except InvalidRequirement as exc:
        raise UsageError(
            f"{FLAG} {value!r} is neither a requirement, a URL nor a path ({exc})", fix=_FIX
        ) from None
    if requirement.name.lower() != "envbuild":
        raise UsageError(
            f"{FLAG} {value!r} installs {requirement.name!r}, not envbuild",
            fix=_FIX,
        )
    if requirement.url and not _URL_RE.fullmatch(requirement.url):
        raise UsageError(f"{FLAG} {value!r}: {requirement.url!r} is not an https/ssh URL", fix=_FIX)
    return value


def default_install(origin: dict | None, version: str) -> str:
    """What CI installs when no --install is given: where this envbuild came from (see the module).

    origin: PEP 610 direct_url.json (None: installed from an index, which pip does not record)."""
    if origin is None:
        return f"envbuild=={version}"
    url = str(origin.get("url", ""))
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and url.startswith(("https://", "ssh://")):
        source = f"git+{url}@{vcs.get('commit_id') or vcs.get('requested_revision') or ''}".rstrip("@")
    elif "archive_info" in origin and url.startswith("https://"):
        source = url
    else:
        raise UsageError(
            f"no {FLAG} given, and this envbuild was installed from {url or 'an unknown place'}, which a CI "
            "runner does not have; envbuild is not published on PyPI, so `pip install envbuild` is no "
            "default either",
            fix=_FIX,
        )
    try:
        return check_install(source)
    except UsageError as exc:  # e.g. a token in the URL: never copied into a committed file
        raise UsageError(
            f"no {FLAG} given, and where this envbuild was installed from cannot be written into CI: "
            f"{exc.message}",
            fix=_FIX,
        ) from None


def installed_origin() -> dict | None:
    """The running envbuild's PEP 610 record, or None when pip recorded none (installed from an index).
    Not installed at all (a source tree on sys.path) reads as a place no runner has."""
    from importlib import metadata

    try:
        dist = metadata.distribution("envbuild")
    except metadata.PackageNotFoundError:
        return {"url": "a source tree (not installed)"}
    text = dist.read_text("direct_url.json")
    if text is None:
        return None
    try:
        data = parse_json(text)
    except ValueError:
        return {"url": "an unreadable direct_url.json"}
    return data if isinstance(data, dict) else {"url": "an unreadable direct_url.json"}


def _version() -> str:
    from envbuild import __version__

    return __version__
