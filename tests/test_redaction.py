"""The scrubber every upstream error passes before it is sent, recorded or logged."""

from __future__ import annotations

import pytest

from sluice.errors import InvalidRequestError, RateLimitError
from sluice.redaction import Redactor

KEY = "opaque-Credential-1234567890"  # matches no pattern: only knowing it finds it


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"bad key {KEY}", "bad key [redacted]"),
        (f"bad key {KEY.replace('-', '%2D')}", f"bad key {KEY.replace('-', '%2D')}"),
        ("header Bearer abc.def", "header [redacted]"),
        ("key sk-proj-abcdefghij1234", "key [redacted]"),
        ("id AKIAIOSFODNN7EXAMPLE used", "id [redacted] used"),
        ("GET /v1?alt=sse&key=AIzaLeaked", "GET /v1?alt=sse&[redacted]"),
        ("nothing secret here", "nothing secret here"),
    ],
    ids=["exact", "other-encoding", "bearer", "sk", "aws-id", "query-key", "clean"],
)
def test_text(text: str, expected: str) -> None:
    assert Redactor([KEY]).text(text) == expected


def test_a_known_secret_in_another_letter_case() -> None:
    """Gemini folds its ``status`` into a lower-case code; an echoed key goes with it."""
    assert Redactor([KEY]).text(f"code {KEY.lower()}") == "code [redacted]"
    assert Redactor([KEY]).text(f"CODE {KEY.upper()}") == "CODE [redacted]"


def test_url_encoded_form_of_a_known_secret() -> None:
    secret = "p@ss/word+1234"
    assert Redactor([secret]).text("sent p%40ss%2Fword%2B1234") == "sent [redacted]"


def test_every_string_field_of_an_error() -> None:
    err = InvalidRequestError(f"x {KEY}", code=f"code {KEY}", param=f"Authorization: Bearer {KEY}")
    scrubbed = Redactor([KEY]).error(err)
    assert scrubbed is err and isinstance(scrubbed, InvalidRequestError)
    assert (err.message, err.code, err.param) == (
        "x [redacted]",
        "code [redacted]",
        "Authorization: [redacted]",
    )
    assert str(err) == "x [redacted]"


def test_short_strings_are_not_taken_for_secrets() -> None:
    err = RateLimitError("slow down", code="rate_limited")
    Redactor(["slow", ""]).error(err)
    assert (err.message, err.code) == ("slow down", "rate_limited")
