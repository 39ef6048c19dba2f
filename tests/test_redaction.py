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
        (f"bad key {KEY.replace('-', '%2D')}", "bad key [redacted]"),
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


@pytest.mark.parametrize(
    "echoed",
    [
        KEY.replace("-", "%2D"),
        KEY.replace("-", "%2d"),
        KEY.replace("C", "%43").replace("1", "%31"),
        "".join(f"%{ord(c):02x}" for c in KEY),
        "".join(f"%{ord(c):02X}" if n % 2 else c for n, c in enumerate(KEY)),
        KEY.replace("-", "%252D"),
        KEY.upper().replace("-", "%2d"),
    ],
    ids=["dash-upper-hex", "dash-lower-hex", "letters", "all", "every-other", "twice", "folded"],
)
def test_any_percent_encoding_of_any_character_of_a_secret(echoed: str) -> None:
    """An upstream may echo the key as it was in a URL, encoding some characters and not
    others, with hex digits in either case."""
    assert Redactor([KEY]).text(f"sent {echoed}, refused") == "sent [redacted], refused"


def test_a_secret_beyond_ascii_in_its_utf8_encoding() -> None:
    secret = "p\u00e4ss-w\u00f6rd-1234"
    assert Redactor([secret]).text("sent p%C3%A4ss%2Dw%c3%b6rd-1234.") == "sent [redacted]."


def test_text_near_a_secret_is_kept() -> None:
    """Percent signs and partial matches are not taken for the secret."""
    text = f"100% of {KEY[:-1]}, 50%2D off, %%2D"
    assert Redactor([KEY]).text(text) == text


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
