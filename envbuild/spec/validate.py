"""Checks for every user value that can reach a Dockerfile, a requirements file or a label.

A value is accepted only when it matches what the field means (a PEP 508 requirement, a Debian
package name, an image reference...) and carries none of the shell metacharacters that would let it
escape into a command. Each check returns the cleaned value or raises ValueError saying what is
accepted; spec/model.py adds the file, table and key.
"""

from __future__ import annotations

import re
import unicodedata

from envbuild.errors import UsageError
from envbuild.oci import labels
from envbuild.oci.reference import TAG_RE, Reference, parse_reference

# Anything that could chain a shell command (line ends are refused with every other control
# character by reject_unsafe_text).
FORBIDDEN = ("&&", "||", ";", "`", "$(", "${", "\\")
# Unicode categories no field needs, each a way to split or disguise a line: control characters
# (Cc, which holds U+0085 NEL), format characters (Cf: zero-width and bidirectional overrides),
# line and paragraph separators (Zl U+2028, Zp U+2029), surrogates and private use.
_UNSAFE_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a surrogate",
    "Co": "a private-use character",
}
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_AUTHORITY_END = frozenset("/?#")


def has_userinfo(value: str) -> bool:
    """Whether `value` holds a URL with credentials (`scheme://user:pw@host`): what the regex
    `[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\s]*@` finds, in linear time. That regex, searched, tried every
    start in a run of letters: an 80k-character label took 4.6 s and a 1 MB one about 45 minutes of
    `render` or `ci` (issue 33). Each `://` is looked at once: its scheme run backwards (no '/' in it,
    so it never reaches the one before) and its authority forwards (which ends at the next '/')."""
    start = 0
    while (at := value.find("://", start)) != -1:
        i, letter = at, False
        while i > 0 and value[i - 1] in _SCHEME_CHARS:
            i -= 1
            letter = letter or value[i].isalpha()
        if letter:
            j = at + 3
            while j < len(value) and value[j] not in _AUTHORITY_END and not value[j].isspace():
                if value[j] == "@":
                    return True
                j += 1
        start = at + 3
    return False


_APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
_CONDA_RE = re.compile(
    r"[a-z0-9_][a-z0-9_.-]*( *(==|=|>=|<=|>|<|!=) *[A-Za-z0-9_.*+!-]+){0,2}"
    r"(, *(>=|<=|>|<|!=|==) *[A-Za-z0-9_.*+!-]+)*",
    re.IGNORECASE | re.ASCII,  # ASCII: \s and friends would match Unicode spaces and separators
)
_URL_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+@:=-]*)?$")
_LABEL_KEY_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
TAG_FIELDS = ("framework", "framework_version", "cuda", "python", "target")


def check_length(value: str) -> str:
    """At most limits.FIELD_CHARACTERS characters: judged before any pattern, so a 1 MB label is
    refused at once instead of being walked character by character by every check (issue 33: a 1 MB
    value stalled `render` and the CI gate for about 45 minutes). No genuine field comes near it."""
    from envbuild._util.limits import FIELD_CHARACTERS

    most = FIELD_CHARACTERS.get()
    if len(value) > most:
        raise ValueError(f"is {len(value):,} characters long, more than the {most:,} a field may hold")
    return value


def reject_unsafe_text(value: str) -> str:
    """The one check every field of a spec or a lock passes, whatever it means: a bounded length, no
    character that ends or hides a line (Python's splitlines() and Docker both split on more than
    \\n), and no credentials in a URL, which would be written into a layer and a committed file."""
    check_length(value)
    for ch in value:
        category = unicodedata.category(ch)
        if category in _UNSAFE_CATEGORIES:
            shown = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL byte"}.get(
                ch, _UNSAFE_CATEGORIES[category]
            )
            raise ValueError(f"contains {shown} (U+{ord(ch):04X}), which could start a new line or hide text")
    if has_userinfo(value):
        raise ValueError(
            "contains a URL with a user name or password; credentials would be written into the "
            "image and the lock (put them in ~/.netrc or the index's keyring, which pip and uv read)"
        )
    return value


def reject_metacharacters(value: str, *, allowed: str = "") -> str:
    """reject_unsafe_text, and nothing that could chain a shell command (`allowed`: what a field's
    own grammar permits, like the ';' before a PEP 508 marker)."""
    reject_unsafe_text(value)
    for bad in FORBIDDEN:
        if bad not in allowed and bad in value:
            shown = {"\\": "a backslash"}.get(bad, repr(bad))
            raise ValueError(f"contains {shown}, which could escape into a shell command")
    return value


def path_text(value: str) -> str:
    """A file or folder path a spec names (it reaches arguments, never a shell): no shell
    metacharacters, not empty."""
    reject_metacharacters(value)
    if not value.strip():
        raise ValueError("is empty; accepted: a folder path, relative to envbuild.toml's folder")
    return value


def pip_requirement(value: str) -> str:
    """A PEP 508 requirement. Its one ';' may only begin an environment marker, which
    packaging parses: it reaches requirements files, never a shell."""
    reject_metacharacters(value, allowed=";")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"is not a PEP 508 requirement ({exc}); accepted: e.g. 'numpy>=1.26'") from None
    if value.count(";") > (1 if requirement.marker is not None else 0):
        raise ValueError(
            "contains ';' outside the one that begins an environment marker, "
            "which could escape into a shell command"
        )
    if requirement.url and not requirement.url.startswith("https://"):
        raise ValueError("direct references must be https:// URLs")
    return str(requirement)


def apt_package(value: str) -> str:
    reject_metacharacters(value)
    if not _APT_RE.fullmatch(value):
        raise ValueError(
            "is not a Debian package name (lowercase letters, digits, + - . and an "
            "optional =version); accepted: e.g. 'libgl1' or 'git=1:2.39.5-0+deb12u1'"
        )
    return value


def conda_spec(value: str) -> str:
    reject_metacharacters(value)
    if not _CONDA_RE.fullmatch(value.strip(" ")):
        raise ValueError("is not a conda match spec; accepted: e.g. 'numpy', 'numpy=1.26', 'numpy>=1.26,<2'")
    return value.strip(" ")


_CHANNEL_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def conda_channel(value: str) -> str:
    """A conda channel: a name on anaconda.org (conda-forge, nvidia) or the URL of a channel or a
    mirror of one (https://conda.example.com/conda-forge), without credentials."""
    reject_metacharacters(value)
    if _CHANNEL_NAME_RE.fullmatch(value) or _URL_RE.fullmatch(value):
        return value.rstrip("/") if "://" in value else value
    raise ValueError(
        "is not a conda channel; accepted: a channel name ('conda-forge') or the http(s) URL of a channel "
        "or its mirror ('https://conda.example.com/conda-forge')"
    )


def url(value: str) -> str:
    reject_metacharacters(value)
    if not _URL_RE.fullmatch(value):
        raise ValueError(
            "is not an http(s) URL without spaces or quotes; accepted: e.g. 'https://pypi.org/simple'"
        )
    return value


def _reference(value: str) -> Reference | None:
    """The parsed reference, by Docker's grammar (envbuild.oci.reference), or None."""
    if value != value.strip():
        return None
    try:
        return parse_reference(value)
    except UsageError:
        return None


def image_ref(value: str) -> str:
    reject_metacharacters(value)
    if _reference(value) is None:
        raise ValueError(
            "is not an image reference; accepted: e.g. 'ubuntu:22.04', "
            "'registry.local:5000/base/debian:bookworm@sha256:<64 hex>'"
        )
    return value


def repository(value: str) -> str:
    reject_metacharacters(value)
    parsed = _reference(value)
    if parsed is None or parsed.name != value:  # a tag or a digest is not part of a repository
        raise ValueError(
            "is not an image repository (lowercase path, optional registry host); "
            "accepted: e.g. 'ghcr.io/acme/train'"
        )
    return value


def tag_template(value: str) -> str:
    """A tag with {framework}, {framework_version}, {cuda}, {python} or {target} placeholders."""
    reject_metacharacters(value)
    sample = {field: "x" for field in TAG_FIELDS}
    try:
        expanded = value.format(**sample)
    except (KeyError, IndexError, ValueError):
        raise ValueError(
            f"may only use the placeholders {', '.join('{' + f + '}' for f in TAG_FIELDS)}"
        ) from None
    if not TAG_RE.fullmatch(expanded):
        raise ValueError(
            "does not make a valid tag (letters, digits, _ . -, at most 128, not starting with . or -)"
        )
    return value


def expand_tag(template: str, fields: dict[str, str]) -> str:
    tag = template.format(**fields).replace("+", "_")
    if not TAG_RE.fullmatch(tag):
        raise ValueError(f"tag template {template!r} expands to {tag!r}, which is not a valid tag")
    return tag


def label_key(value: str) -> str:
    reject_metacharacters(value)
    if not _LABEL_KEY_RE.fullmatch(value):
        raise ValueError("is not a label key (lowercase reverse-DNS style, e.g. 'com.example.team')")
    if value.startswith(labels.PREFIX):
        raise ValueError(f"is reserved: envbuild writes the {labels.PREFIX}* labels itself")
    return value


def free_text(value: str) -> str:
    """Label and environment values: any printable text without shell metacharacters."""
    reject_metacharacters(value)
    if len(value) > 1024:
        raise ValueError("is longer than 1024 characters")
    return value


def env_name(value: str) -> str:
    reject_metacharacters(value)
    if not _ENV_NAME_RE.fullmatch(value):
        raise ValueError("is not an environment variable name (letters, digits, _)")
    return value


def user_name(value: str) -> str:
    reject_metacharacters(value)
    if not _USER_RE.fullmatch(value):
        raise ValueError("is not a Linux user name (lowercase, digits, _ -, at most 32)")
    if value in ("root", "0"):
        raise ValueError("would run the image as root; images run as a non-root user")
    return value


def smoke_import(value: str) -> str:
    """A module `[smoke] imports` names: what `import` takes, by the smoke program's own rule."""
    from envbuild.smoke import module_problem

    reject_unsafe_text(value)
    problem = module_problem(value)
    if problem is None:
        return value
    if "-" in value and module_problem(value.replace("-", "_")) is None:
        problem += " (a pip name? a module's name can differ from its package's)"
    raise ValueError(
        f"{problem}; accepted: the name you import, e.g. 'sklearn' for scikit-learn, 'yaml' for PyYAML"
    )


def smoke_command_line(value: str) -> str:
    """`[smoke] command`: one line, split into words like a POSIX shell splits them and run without a
    shell, so it must hold nothing a shell would act on outside single quotes (the smoke program's rule:
    it means the same run either way)."""
    from envbuild.smoke import command_problem

    reject_unsafe_text(value)
    problem = command_problem(value)[1]
    if problem is None:
        return value
    raise ValueError(
        f"{problem}; accepted: one command and its arguments, e.g. 'python -m myproject.selftest'"
    )


def target_name(value: str) -> str:
    reject_metacharacters(value)
    if not _NAME_RE.fullmatch(value):
        raise ValueError("is not a target name (lowercase letters, digits, _ . -)")
    return value
