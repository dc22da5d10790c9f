"""One HTTP session for a vendor run: envbuild's retry policy (_util.http) and its deadline for an
answer's start (_util.httpbody), with the user's netrc and proxies as requests reads them."""

from __future__ import annotations

from envbuild._util import httpbody
from envbuild._util.http import short_reason, with_retries
from envbuild._util.record import TYPE_CHECKING
from envbuild._util.redact import redact
from envbuild.errors import EnvbuildError

if TYPE_CHECKING:
    import requests


class Session:
    def __init__(self, *, timeout: float = 60, retries: int = 3) -> None:
        import requests

        from envbuild import __version__

        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"envbuild-vendor/{__version__}"
        self.timeout = timeout
        self.retries = retries

    def get(self, url: str, *, headers: dict[str, str] | None = None) -> requests.Response:
        def unreachable(attempts: int, exc: BaseException) -> EnvbuildError:
            return EnvbuildError(
                f"{redact(url)} is unreachable after {attempts} attempt(s): {short_reason(exc)}",
                fix="check the network, the proxy and the spec's [mirrors]; run `envbuild vendor` again "
                "(what it fetched is kept)",
            )

        return with_retries(
            lambda: httpbody.answered(
                lambda: self.session.get(url, headers=headers, timeout=self.timeout, stream=True), url=url
            ),
            retries=self.retries,
            unreachable=unreachable,
        )

    def close(self) -> None:
        self.session.close()
