"""The one retry policy of envbuild: the registry API, PyPI, the package indexes and docker pushes.

Connection errors, timeouts and 5xx answers are retried with doubling waits (BACKOFF_START_S, then
twice that, ...); 4xx answers are answers. What "unreachable" means to the user differs per caller,
so the caller builds that error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from envbuild._util.record import TYPE_CHECKING
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    import requests

BACKOFF_START_S = 0.5


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


def with_retries(
    send: Callable[[], requests.Response],
    *,
    retries: int,
    unreachable: Callable[[int, BaseException], EnvbuildError],
) -> requests.Response:
    """`send()` up to 1 + `retries` times; `unreachable(attempts, exc)` is raised when the last
    attempt fails to connect. The last 5xx answer is returned for the caller to report."""
    import requests

    for number, last in enumerate(attempts(retries), 1):
        try:
            response = send()
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if isinstance(exc, requests.exceptions.SSLError):
                raise
            if last:
                raise unreachable(number, exc) from None
            continue
        if response.status_code < 500 or last:
            return response
    raise AssertionError("unreachable")  # pragma: no cover


def short_reason(exc: BaseException) -> str:
    """A short cause: the innermost message, which names the host and port but no header."""
    text = str(exc)
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if match:
        return match.group(1).strip()
    return type(exc).__name__ if len(text) > 200 else text
