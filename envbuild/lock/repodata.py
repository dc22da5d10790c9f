"""A conda channel's `<subdir>/repodata.json`, fetched by envbuild within bounds, for rattler to solve.

rattler's own gateway reads repodata with no bound on its size or on the time it takes: an endless
repodata.json left a 16.7 GB file in the cache after the failure (issue 33). So envbuild fetches it
itself, with envbuild._util.httpbody.save: at most DOWNLOAD_BYTES (gzip transfer encoding counted as
decoded), within HTTP_DEADLINE_S for the whole answer, written beside its cache file and renamed only
when whole, so a failure leaves nothing behind. rattler then reads the file (SparseRepoData), which
keeps its solve and its record URLs (`info.base_url` included) the same as its gateway's.

The cache is keyed by the URL, and revalidated on every lock with the ETag and Last-Modified the
server gave (a 304 keeps the file): a channel that changed is read afresh, as `lock --check` needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from envbuild._util import httpbody, limits
from envbuild._util.files import NotReadable, read_regular, write_atomic
from envbuild._util.http import short_reason, with_retries
from envbuild._util.jsontext import parse_json
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError, LockError

if TYPE_CHECKING:
    import requests

TIMEOUT_S = 30.0  # per read; the whole answer is bounded by HTTP_DEADLINE_S
RETRIES = 2
META_BYTES = 64 * 1024  # the validators kept beside a cached repodata.json


def repodata_url(channel: str, subdir: str) -> str:
    return f"{channel.rstrip('/')}/{subdir}/repodata.json"


def _unreadable(channel: str, why: str, fix: str | None = None) -> LockError:
    return LockError(
        redact(f"the conda channel {channel} could not be read: {why}"),
        fix=fix
        or "check the channel URL in [packages] conda-channels, the network or proxy, and that the "
        "mirror serves <subdir>/repodata.json",
    )


def _validators(meta: str) -> dict[str, str]:
    """The conditional-request headers a cached copy earned; {} when there are none or they are not
    what envbuild wrote (the cache is not trusted for its shape either)."""
    try:
        data = parse_json(read_regular(meta, limit=META_BYTES))
    except (OSError, NotReadable, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    headers = {}
    for header, key in (("If-None-Match", "etag"), ("If-Modified-Since", "last-modified")):
        value = data.get(key)
        if isinstance(value, str) and value and value.isprintable() and len(value) < 1024:
            headers[header] = value
    return headers


def fetch(session: requests.Session, channel: str, subdir: str, directory: str) -> str:
    """The path of `channel`'s `subdir` repodata.json under `directory`, fetched (or revalidated)
    within DOWNLOAD_BYTES and HTTP_DEADLINE_S. A platform subdir the channel does not have (404) is
    an empty one, as rattler's gateway treats it; noarch must be there. Anything else is a LockError
    naming the channel; nothing partial is left in `directory`."""
    url = repodata_url(channel, subdir)
    key = hashlib.sha256(url.encode()).hexdigest()[:32]
    path = os.path.join(directory, f"{key}-{subdir}.json")
    meta = path + ".http"
    headers = _validators(meta) if os.path.isfile(path) else {}

    def unreachable(attempts: int, exc: BaseException) -> EnvbuildError:
        return _unreadable(channel, f"{url} is unreachable after {attempts} attempt(s): {short_reason(exc)}")

    started = time.monotonic()
    response = with_retries(
        lambda: httpbody.answered(
            lambda: session.get(url, headers=headers, timeout=TIMEOUT_S, stream=True),
            url=url,
            started=started,
        ),
        retries=RETRIES,
        unreachable=unreachable,
    )
    status = response.status_code
    if status == 304 and headers:
        response.close()
        return path
    if status == 404 and subdir != "noarch":
        response.close()
        write_atomic(path, json.dumps({"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}))
        if os.path.exists(meta):
            os.unlink(meta)
        return path
    if status != 200:
        response.close()
        raise _unreadable(channel, f"{url} answered HTTP {status}")
    if os.path.exists(meta):  # the old validators must not outlive the file they were for
        os.unlink(meta)
    try:
        httpbody.save(
            response, path, what="a conda repodata.json", limit=limits.DOWNLOAD_BYTES, started=started
        )
    except LockError:
        raise
    except EnvbuildError as exc:
        raise _unreadable(channel, exc.message, exc.fix) from None
    kept = {
        key: response.headers[header]
        for key, header in (("etag", "ETag"), ("last-modified", "Last-Modified"))
        if response.headers.get(header)
    }
    if kept:
        write_atomic(meta, json.dumps(kept))
    return path
