"""Cursor pagination's pure parts: the query string, ``limit``, the opaque cursor."""

from __future__ import annotations

import base64

import pytest

from sluice.errors import InvalidRequestError
from sluice.server.pages import (
    AccountPosition,
    decode_cursor,
    encode_cursor,
    page_limit,
    query_params,
)


@pytest.mark.parametrize(
    ("text", "limit"),
    [(None, 50), ("1", 1), ("50", 50), ("500", 500), ("0500", 500)],
    ids=["default", "one", "fifty", "max", "leading-zero"],
)
def test_limits_in_range(text: str | None, limit: int) -> None:
    assert page_limit(text) == limit


@pytest.mark.parametrize("text", ["0", "501", "-1", "1.5", "", " 5", "5_0", "+5", "abc", "99999"])
def test_limits_out_of_range_or_not_numbers_are_400(text: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        page_limit(text)
    assert (err.value.status, err.value.param, err.value.code) == (400, "limit", "invalid_limit")


def test_a_cursor_round_trips_and_is_opaque_text() -> None:
    cursor = encode_cursor(AccountPosition("acct_Zz09"))
    assert cursor.isascii() and "acct_Zz09" not in cursor and "=" not in cursor
    assert decode_cursor(cursor, AccountPosition) == AccountPosition("acct_Zz09")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not base64!",
        _b64(b"not json"),
        _b64(b'{"after": 5}'),
        _b64(b'{"after": "a", "extra": 1}'),
        _b64(b'{"before": "a"}'),
        _b64(b"[]"),
        encode_cursor(AccountPosition("acct_1")) + "==",
        encode_cursor(AccountPosition("acct_1")) + "A",
        "é",
    ],
    ids=[
        "empty",
        "not-base64",
        "not-json",
        "wrong-type",
        "unknown-field",
        "missing-field",
        "array",
        "padded",
        "trailing-junk",
        "non-ascii",
    ],
)
def test_a_cursor_this_listing_did_not_give_out_is_400(cursor: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        decode_cursor(cursor, AccountPosition)
    assert (err.value.status, err.value.param, err.value.code) == (400, "cursor", "invalid_cursor")


@pytest.mark.parametrize(
    ("query", "params"),
    [
        ("", {}),
        ("limit=5", {"limit": "5"}),
        ("limit=5&cursor=abc", {"limit": "5", "cursor": "abc"}),
        ("cursor=a%2Db", {"cursor": "a-b"}),
    ],
    ids=["none", "limit", "both", "percent-decoded"],
)
def test_known_query_parameters(query: str, params: dict[str, str]) -> None:
    assert query_params(query, ("limit", "cursor")) == params


@pytest.mark.parametrize(
    ("query", "param"),
    [("offset=5", "offset"), ("limit=1&limit=2", "limit"), ("limit", None), ("a=1&" * 20, None)],
    ids=["unknown", "repeated", "no-value", "too-many"],
)
def test_unknown_repeated_or_malformed_parameters_are_400(query: str, param: str | None) -> None:
    with pytest.raises(InvalidRequestError) as err:
        query_params(query, ("limit", "cursor"))
    assert (err.value.status, err.value.param) == (400, param)
