"""What an operator's text names for a revocation (a key id, a whole key by its digest,
a prefix), and the messages for naming nothing: never more of a key than its readable
prefix."""

from __future__ import annotations

import pytest

from sluice.accounts.keys import key_digest, keys_named, new_key, none_named
from sluice.storage.base import KeySelector

KEY = new_key(bytes(range(32)))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("key_4Xb9TqLmZ0aRc7Yd2Ke5Wf", KeySelector("id", "key_4Xb9TqLmZ0aRc7Yd2Ke5Wf")),
        ("key_000002", KeySelector("id", "key_000002")),
        (KEY, KeySelector("digest", key_digest(KEY))),
        (KEY[:14], KeySelector("prefix", KEY[:14])),
        (KEY[:18], KeySelector("prefix", KEY[:18])),
        (KEY[:49], KeySelector("prefix", KEY[:49])),
    ],
    ids=["random id", "counted id", "whole key", "shortest prefix", "readable prefix", "long"],
)
def test_text_names_keys_by_id_digest_or_prefix(text: str, named: KeySelector) -> None:
    assert keys_named(text) == named


@pytest.mark.parametrize(
    "text",
    ["", "key_", "key_a-b", "acct_x", "sk-sluice-abc", KEY + "a", KEY + "\n", "sk-sluice-ab%d"],
)
def test_anything_else_is_refused_saying_what_would_do(text: str) -> None:
    with pytest.raises(ValueError, match="4 more characters"):
        keys_named(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("key_x1", "no live key has the id 'key_x1'"),
        (KEY, f"no live key is '{KEY[:18]}…'"),
        (KEY[:30], "only those are kept readable"),
        (KEY[:14], f"no live key starts with '{KEY[:14]}'"),
    ],
)
def test_naming_nothing_says_so_without_the_secret(text: str, says: str) -> None:
    message = none_named(text)
    assert says in message
    assert KEY[18:] not in message and KEY[18:30] not in message
