"""The one retry policy of envbuild: the registry API, PyPI, the package indexes and docker pushes.

What is retried, with doubling waits (BACKOFF_START_S, then twice that, ...) between attempts:
- connection errors, resets (also in the middle of an answer) and timeouts;
- 5xx answers, and 429 Too Many Requests.
A 429 or 503 that carries `Retry-After` (delta seconds or an HTTP date) is retried after the time it
asks for instead of the backoff, up to RETRY_AFTER_CAP_S: a server that asks for longer is not waited
for; the request fails at once with an error that says when it asked to be called again. Other 4xx
answers are answers, never retried.

What "unreachable" means to the user differs per caller, so the caller builds that error; the last
5xx answer is returned for the caller to report. A 429 that outlasts the retries is an EnvbuildError
naming the URL and saying "rate limited", the same for every caller.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    import requests

BACKOFF_START_S = 0.5
RETRY_AFTER_CAP_S = 60.0  # the longest single wait a server's Retry-After gets
RETRY_AFTER_STATUSES = (429, 503)


def attempts(retries: int) -> Iterator[bool]:
    """One item per attempt (1 + retries), True on the last; waits BACKOFF_START_S, then twice
    that, and so on, before each attempt after the first."""
    retries = max(0, int(retries))
    delay = BACKOFF_START_S
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(delay)
            delay *= 2
        yield attempt == retries


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header value asks to wait: "120" or an HTTP date ("Wed, 21 Oct 2015
    07:28:00 GMT", a date in the past is 0); None when there is none or it is neither."""
    if not value or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        from datetime import timezone

        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


MAX_REDIRECTS = 30  # requests' own limit (Session.max_redirects), which TooManyRedirects reports


def with_retries(
    send: Callable[[], requests.Response],
    *,
    retries: int,
    unreachable: Callable[[int, BaseException], EnvbuildError],
) -> requests.Response:
    """`send()` up to 1 + `retries` times; `unreachable(attempts, exc)` is raised when the last
    attempt fails to connect. The last 5xx answer is returned for the caller to report; a 429 that
    is still there after the last attempt, or a Retry-After beyond RETRY_AFTER_CAP_S, raises."""
    import requests

    retries = max(0, int(retries))
    delay = BACKOFF_START_S
    for number in range(1, retries + 2):
        last = number == retries + 1
        wait = delay
        try:
            response = send()
        except requests.exceptions.TooManyRedirects as exc:  # a loop, not a blip: never retried
            url = redact(str(getattr(exc.request, "url", "") or "the server").split("?", 1)[0])
            raise EnvbuildError(
                f"{url} redirected more than {MAX_REDIRECTS} times (a redirect loop)",
                fix="check the URL and the server's configuration; a mirror that redirects to itself "
                "needs fixing there",
            ) from None
        except (
            requests.exceptions.ConnectionError,
            requests.exceptions.Timeout,
            requests.exceptions.ChunkedEncodingError,  # the connection reset while the body came
        ) as exc:
            if isinstance(exc, requests.exceptions.SSLError):
                raise
            if last:
                raise unreachable(number, exc) from None
        else:
            status = response.status_code
            if status < 500 and status != 429:
                return response
            asked = None
            if status in RETRY_AFTER_STATUSES:
                asked = retry_after(response.headers.get("Retry-After"))
            if asked is not None and asked > RETRY_AFTER_CAP_S:
                raise come_back_later(response, number, asked)
            if last:
                if status == 429:
                    raise rate_limited(response, number)
                return response
            if asked is not None:
                wait = asked
            response.close()
        time.sleep(wait)
        delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _where(response: requests.Response) -> tuple[str, str]:
    """(host, URL without its query) of the request `response` answers, credentials masked."""
    url = redact(str(response.url or "").split("?", 1)[0])
    host = re.sub(r"^\w+://", "", url).split("/", 1)[0] or "the server"
    return host, url or "the request"


def _what(status: int) -> str:
    return "rate limited: HTTP 429 Too Many Requests" if status == 429 else f"HTTP {status}"


def rate_limited(response: requests.Response, number: int) -> EnvbuildError:
    host, url = _where(response)
    return EnvbuildError(
        f"{host} rate limited envbuild: {url} answered HTTP 429 Too Many Requests to all {number} attempt(s)",
        fix=f"wait and run it again later; for Docker Hub, `docker login` raises the pull limit, or "
        f"use a mirror of the image (each wait follows the server's Retry-After, up to "
        f"{RETRY_AFTER_CAP_S:g} s)",
    )


def come_back_later(response: requests.Response, number: int, seconds: float) -> EnvbuildError:
    import datetime

    host, url = _where(response)
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return EnvbuildError(
        f"{host} asked envbuild to come back in {seconds:.0f} s (at {at:%Y-%m-%d %H:%M:%S} UTC) for "
        f"{url} ({_what(response.status_code)}, attempt {number}); envbuild waits at most "
        f"{RETRY_AFTER_CAP_S:g} s for a Retry-After",
        fix=f"run it again after {at:%H:%M:%S} UTC; for Docker Hub, `docker login` raises the pull "
        "limit, or use a mirror of the image",
    )


def short_reason(exc: BaseException) -> str:
    """A short cause: the innermost message, which names the host and port but no header."""
    text = str(exc)
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if match:
        return match.group(1).strip()
    return type(exc).__name__ if len(text) > 200 else text
