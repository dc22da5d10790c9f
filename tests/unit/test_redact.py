"""`redact()`: every form in which Engine or registry text can carry a secret comes out as `***`, and
everything else comes out unchanged (a redacted message must still say what went wrong)."""

from __future__ import annotations

import base64
import json
import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envbuild._util.redact import redact, redact_values

PASSWORD = "pw-Zx81-s3cret"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # header values, as echoed by a proxy or a registry, in every quoting they reach us in
        (f"Authorization: Basic {BASIC}", BASIC),
        (f"authorization:Basic {BASIC}\r\nUser-Agent: docker/20.10", BASIC),
        (f"Proxy-Authorization: Bearer {TOKEN}", TOKEN),
        (f"{{'Authorization': 'Bearer {TOKEN}'}}", TOKEN),
        (f'{{"Authorization": "Basic {BASIC}"}}', BASIC),
        (f"map[Authorization:[Basic {BASIC}] Accept:[*/*]]", BASIC),  # Go's http.Header
        (f"X-Registry-Auth: {BASIC}", BASIC),
        (f"Authorization: token {TOKEN}", TOKEN),
        (f"Authorization: {TOKEN}", TOKEN),
        # bare schemes
        (f"denied: Basic {BASIC} is not allowed", BASIC),
        (f"header was basic {BASIC}", BASIC),
        (f"got Bearer {TOKEN}, wanted another", TOKEN),
        # token-ish JSON fields, plain, nested in a JSON string, and Python's repr
        (json.dumps({"token": TOKEN, "expires_in": 300}), TOKEN),
        (json.dumps({"access_token": TOKEN}), TOKEN),
        (json.dumps({"refresh_token": TOKEN}), TOKEN),
        (json.dumps({"password": PASSWORD}), PASSWORD),
        (json.dumps({"Password": PASSWORD}), PASSWORD),
        (json.dumps({"identitytoken": TOKEN}), TOKEN),
        (json.dumps({"auths": {"reg.example": {"auth": BASIC}}}), BASIC),
        (json.dumps({"message": json.dumps({"token": TOKEN})}), TOKEN),  # JSON inside a JSON string
        (f"{{'password': '{PASSWORD}'}}", PASSWORD),
        (json.dumps({"password": 'a"b\\c' + PASSWORD}), PASSWORD),  # escaped quotes inside the value
        # query strings and form bodies
        (f"GET https://auth.example/token?service=r&access_token={TOKEN}&x=1", TOKEN),
        (f"password={PASSWORD}&username=alice", PASSWORD),
        # URL user-info
        (f"https://alice:{PASSWORD}@registry.example/v2/", PASSWORD),
        (f"fetching http://{TOKEN}@127.0.0.1:5000/x failed", TOKEN),
        (f"git+https://alice:{PASSWORD}@git.example/x.git", PASSWORD),
        (f"https://alice:p@ss{PASSWORD}@host/x", PASSWORD),  # an unescaped @ in the password
    ],
)
def test_every_form_is_redacted(text: str, secret: str) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert "***" in redacted
    assert redact(redacted) == redacted  # idempotent: redacting twice changes nothing more


def test_what_is_around_a_secret_stays() -> None:
    assert redact(f"Authorization: Basic {BASIC}") == "Authorization: ***"
    assert redact(f"denied: Basic {BASIC} is not allowed") == "denied: Basic *** is not allowed"
    assert redact(f"https://alice:{PASSWORD}@registry.example/v2/") == "https://***@registry.example/v2/"
    assert json.loads(redact(json.dumps({"token": TOKEN, "expires_in": 300}))) == {
        "token": "***",
        "expires_in": 300,
    }
    assert redact(f"got Bearer {TOKEN}, wanted another") == "got Bearer ***, wanted another"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "registry 127.0.0.1:5000 refused access to x/y (HTTP 401; no credentials); it needs credentials",
        "pushing 127.0.0.1:5000/x/y:t failed: unauthorized: authentication required",
        "use a registry with Bearer-token or basic authentication",
        'Bearer realm="https://auth.example/token",service="registry.example"',
        "Basic authentication failed; docker login reg.example",
        "https://registry.example/v2/x/y/manifests/sha256:" + "a" * 64,
        "user@example.com wrote the spec",
        '{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}',
        "step 3/9: RUN pip install --no-index -r requirements.txt",
    ],
)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_redact_values_walks_a_record() -> None:
    record = {
        "error": f"pushing x failed: Authorization: Basic {BASIC}",
        "stages": {"promote": {"note": [f"https://alice:{PASSWORD}@h/x", 3, None, True]}},
        "ok": False,
    }
    redacted = redact_values(record)
    assert BASIC not in json.dumps(redacted) and PASSWORD not in json.dumps(redacted)
    assert redacted["ok"] is False and redacted["stages"]["promote"]["note"][1:] == [3, None, True]
    assert record["error"].endswith(BASIC)  # the caller's record is not changed in place


SECRET_CHARS = string.ascii_letters + string.digits + "-._~!$%&()*+,;="


@given(
    user=st.text(string.ascii_letters + string.digits, min_size=1, max_size=12),
    password=st.text(SECRET_CHARS, min_size=8, max_size=40),
)
@example(user="0", password="password")  # hypothesis found it: the secret is also a key's name
def test_no_generated_credential_survives_any_form(user: str, password: str) -> None:
    def texts(user: str, password: str, basic: str) -> list[str]:
        return [
            f"error: Authorization: Basic {basic}",
            f'{{"errors":[{{"code":"DENIED","message":"Authorization: Basic {basic}"}}]}}',
            json.dumps({"auth": basic, "password": password, "token": password}),
            json.dumps({"detail": json.dumps({"password": password})}),
            f"Bearer {basic}",
            f"failed https://{user}:{password}@registry.example/v2/",
        ]

    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    # The texts with the secrets left out: a secret that also occurs there (a password that is
    # literally "password", say) is a word of the message, which redaction rightly keeps.
    skeletons = texts("\0", "\0", "\0")
    for text, skeleton in zip(texts(user, password, basic), skeletons, strict=True):
        redacted = redact(text)
        for secret in (basic, password):
            if secret not in skeleton:
                assert secret not in redacted, (text, redacted)
