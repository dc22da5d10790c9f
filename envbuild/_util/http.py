"""The retry loop every HTTP client in envbuild shares (registry API, PyPI, package indexes).

Connection errors, timeouts and 5xx answers are retried with doubling waits; 4xx answers are
answers. What "unreachable" means to the user differs per caller, so the caller builds that error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    import requests


def with_retries(
    send: Callable[[], requests.Response],
    *,
    retries: int,
    backoff_s: float,
    unreachable: Callable[[int, BaseException], EnvbuildError],
) -> requests.Response:
    """`send()` up to 1 + `retries` times; `unreachable(attempts, exc)` is raised when the last
    attempt fails to connect. The last 5xx answer is returned for the caller to report."""
    import requests

    delay = backoff_s
    for attempt in range(retries + 1):
        last = attempt == retries
        try:
            response = send()
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if isinstance(exc, requests.exceptions.SSLError):
                raise
            if last:
                raise unreachable(attempt + 1, exc) from None
        else:
            if response.status_code < 500 or last:
                return response
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def short_reason(exc: BaseException) -> str:
    """A short cause: the innermost message, which names the host and port but no header."""
    text = str(exc)
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if match:
        return match.group(1).strip()
    return type(exc).__name__ if len(text) > 200 else text
