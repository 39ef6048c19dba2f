"""How deep JSON nests, told before a recursive decoder is asked to find out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.wire.bounds import json_depth_exceeds


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    ("body", "limit", "exceeds"),
    [
        (nested(64), 64, False),
        (nested(65), 64, True),
        (b'{"a": {"b": {"c": [1, 2, {"d": []}]}}}', 4, True),
        (b'{"a": {"b": {"c": [1, 2, {"d": []}]}}}', 6, False),
        (b'["[[[[[[[[", "\\"]]]]]]]]", "{{{{{{{"]', 2, False),
        (b"[1, 2, 3] " * 100, 2, False),  # many brackets, none nested
        (b'"\\\\"[[[[', 2, True),  # an escaped backslash ends the string
        (b"[[[[[[", 3, True),  # unclosed: the decoder will say it is malformed
    ],
    ids=["at", "past", "mixed", "mixed-ok", "in-strings", "flat", "escapes", "unclosed"],
)
def test_depth(body: bytes, limit: int, exceeds: bool) -> None:
    assert json_depth_exceeds(body, limit) is exceeds


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


@given(JSON, st.integers(0, 12))
def test_agrees_with_the_depth_of_the_decoded_value(value: object, limit: int) -> None:
    body = json.dumps(value).encode()
    assert json_depth_exceeds(body, limit) is (depth_of(value) > limit)
