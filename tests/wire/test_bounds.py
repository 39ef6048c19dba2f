"""How deep JSON nests, told before a recursive decoder is asked to find out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.wire.bounds import (
    DEFAULT_MAX_JSON_VALUES,
    MAX_BLOCKS,
    MAX_MESSAGES,
    MAX_TOOLS,
    json_bounds_problem,
    json_depth_exceeds,
)


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


def structure_of(value: object) -> int:
    """Commas and opening brackets of ``value`` as JSON, outside its strings."""
    if isinstance(value, list):
        return 1 + max(len(value) - 1, 0) + sum(map(structure_of, value))
    if isinstance(value, dict):
        return 1 + max(len(value) - 1, 0) + sum(map(structure_of, value.values()))
    return 0


@given(JSON, st.integers(1, 40))
def test_values_are_counted_outside_strings(value: object, most: int) -> None:
    body = json.dumps(value).encode()
    expected = "values" if structure_of(value) + 1 > most else None
    if depth_of(value) > 64:
        return
    assert json_bounds_problem(body, 64, most) == expected


@pytest.mark.parametrize(
    ("body", "most", "problem"),
    [
        (b"[" + b"1," * 98 + b"1]", 100, None),  # an array of 99: 100 values, the bound
        (b"[" + b"1," * 99 + b"1]", 100, "values"),
        (json.dumps(["a, b, [c], {d}" * 1000]).encode(), 5, None),  # structure inside a string
        (json.dumps(['\\"', "[", '\\\\"', "{,"] * 10).encode(), 50, None),  # escapes
        (b'["' + b'", "'.join([b"x"] * 300) + b'"]', 100, "values"),  # many strings
        (b"[" * 70 + b"]" * 70, 100, "depth"),  # too deep first, whatever the count
    ],
    ids=["at-bound", "past", "in-a-string", "escapes", "strings", "deep"],
)
def test_values(body: bytes, most: int, problem: str | None) -> None:
    assert json_bounds_problem(body, 64, most) == problem


def test_a_body_past_the_values_bound_is_refused_before_decoding() -> None:
    """Found by an attacker's pass: 100,000 tools in 7.6 MB took half a second to decode
    on the event loop; now a 400 `json_too_large` after a few passes over the bytes."""
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool] * 100_000}
    ).encode()
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(body)
    assert info.value.code == "json_too_large"
    assert f"{DEFAULT_MAX_JSON_VALUES:,}" in info.value.message


HI = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "t"}}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [HI] * (MAX_MESSAGES + 1)}, "messages"),
        ({"messages": [HI], "tools": [TOOL] * (MAX_TOOLS + 1)}, "tools"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 2001}]},
            "messages[0].content",
        ),
    ],
    ids=["messages", "tools", "blocks"],
)
def test_element_counts_are_capped(body: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(json.dumps({"model": "m", **body}).encode())
    assert info.value.param == param
    assert MAX_BLOCKS == 2000


def test_element_counts_at_their_caps_are_served() -> None:
    body = {"model": "m", "messages": [HI] * MAX_MESSAGES, "tools": [TOOL] * MAX_TOOLS}
    req = decode_chat_request(json.dumps(body).encode())
    assert (len(req.messages), len(req.tool_list)) == (MAX_MESSAGES, MAX_TOOLS)
