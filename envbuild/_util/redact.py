"""The one redaction of envbuild: secrets out of any text that came from the Engine or a registry.

envbuild never puts a credential in a message itself, but it does pass on what others say: a registry's
error body, a push error the Engine relays, a build log line, an exception's text. Those can echo what
they were sent: a proxy that quotes the `Authorization` header it refused, a token service that
returns its JSON in an error, a URL with `user:password@` in it. Such text reaches a terminal, a CI log
and record.json, which are read by more people than the credential was meant for.

`redact(text)` replaces each secret with `***` and leaves the rest of the text as it was, so the
message still says what went wrong. It covers:

- header values: `Authorization`, `Proxy-Authorization`, `X-Registry-Auth`, `X-Registry-Config`,
  `Cookie`, `Set-Cookie`, written `Name: value`, `"Name": "value"`, `'Name': 'value'` or Go's
  `map[Name:[value]]`;
- `Basic <base64>` and `Bearer <token>` wherever they stand;
- JSON (or Python repr) fields named like a secret: `token`, `access_token`, `refresh_token`,
  `id_token`, `identitytoken`, `registrytoken`, `password`, `passwd`, `secret`, `client_secret`,
  `auth`, also when the JSON sits inside another JSON string (`\\"token\\": \\"...\\"`);
- the same names as `name=value` in a query string or a form body;
- URL user-info: `scheme://user:pass@host` becomes `scheme://***@host`.

It is applied where text from outside is turned into an error, where a build log line is written or
shown, where the command line prints an error, and to every string of record.json as it is written;
applying it twice changes nothing more.
"""

from __future__ import annotations

import re

MASK = "***"

_SECRET_HEADERS = r"(?:proxy-)?authorization|x-registry-auth|x-registry-config|set-cookie|cookie"
_SECRET_FIELDS = (
    r"access_token|refresh_token|id_token|client_secret|identitytoken|registrytoken"
    r"|token|password|passwd|secret|auth"
)

# `Authorization: Basic abc`, `"Authorization": "Bearer abc"`, `map[Authorization:[Basic abc]]`: the
# name, its separator and an opening bracket are kept; the value runs to the end of its line, quoted
# string or bracket
_HEADER = re.compile(
    rf"(?i)(?<![\w-])((?:{_SECRET_HEADERS})\\?[\"']?\s*[:=]\s*\\?[\"']?\[?)([^\r\n\"'\\\]]+)"
)
# `Basic <base64>` / `Bearer <token>`. A lowercase word after them is prose ("basic authentication")
# or a challenge parameter ("Bearer realm=..."), never a credential: those are left alone
_SCHEME = re.compile(
    r"(?i)(?<![\w-])(basic|bearer)(\s+)(?-i:(?![a-z]+(?:=|\b(?![+/.~-]))))([A-Za-z0-9._~+/-]+=*)"
)
# a secret-named field with a double-quoted JSON string value (escapes inside it included)
_JSON_FIELD = re.compile(rf'(?i)("(?:{_SECRET_FIELDS})"\s*:\s*")((?:[^"\\]|\\.)*)(")')
# the same inside a JSON string (quotes escaped once), or in Python's repr (single quotes)
_NESTED_FIELD = re.compile(
    rf"(?i)((?:\\\"|')(?:{_SECRET_FIELDS})(?:\\\"|')\s*:\s*(?:\\\"|'))((?:[^\"'\\]|\\[^\"'])*)"
)
# `access_token=...` in a query string or a form body
_QUERY_FIELD = re.compile(rf"(?i)(?<![\w-])((?:{_SECRET_FIELDS})=)([^&\s\"',;]+)")
# `scheme://user:pass@host`: everything between `//` and the last `@` of the authority
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s\"'<>@]*(?:@[^/?#\s\"'<>@]*)*@")


def redact(text: str) -> str:
    """`text` with every secret it carries replaced by `***` (see the module's docstring)."""
    if not text:
        return text
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _HEADER.sub(lambda m: m.group(1) + MASK, text)
    text = _JSON_FIELD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _NESTED_FIELD.sub(lambda m: m.group(1) + MASK, text)
    text = _QUERY_FIELD.sub(lambda m: m.group(1) + MASK, text)
    return _SCHEME.sub(lambda m: m.group(1) + m.group(2) + MASK, text)


def redact_values(value: object) -> object:
    """A copy of a JSON-shaped value (dicts, lists, strings, numbers) with `redact` applied to every
    string in it, keys included: record.json is written through this."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v) for v in value]
    return value
