from __future__ import annotations

import inspect
import json
from typing import Any

import msgspec
import pytest
from openai.resources.chat.completions.completions import Completions

from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.wire.chat import CHAT_WIRE, OVERRIDE_FIELDS, ChatRequest, NativeFields

FULL_REQUEST: dict[str, Any] = {
    "model": "openai/gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Rules."}]},
        {
            "role": "user",
            "name": "ada",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                },
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "function", "name": "legacy", "content": "old"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up",
                "strict": True,
                "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}},
            },
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "lookup"}},
    "parallel_tool_calls": False,
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": True, "schema": {"type": "object"}},
    },
    "temperature": 0.2,
    "top_p": 0.9,
    "frequency_penalty": 0.1,
    "presence_penalty": -0.1,
    "stop": ["END", "STOP"],
    "seed": 7,
    "max_tokens": 100,
    "max_completion_tokens": 90,
    "n": 2,
    "user": "u-1",
    "metadata": {"team": "a"},
    "reasoning_effort": "low",
    "logprobs": True,
    "top_logprobs": 3,
    "logit_bias": {"50256": -100},
    "stream": True,
    "stream_options": {"include_usage": True},
    "service_tier": "auto",
    "store": False,
    "prediction": {"type": "content", "content": "x"},
}


def roundtrip(doc: dict[str, Any]) -> dict[str, Any]:
    req = decode_chat_request(json.dumps(doc).encode())
    out: dict[str, Any] = json.loads(msgspec.json.encode(req))
    return out


def test_everything_the_openai_api_accepts_passes_and_reencodes_faithfully() -> None:
    assert roundtrip(FULL_REQUEST) == FULL_REQUEST


def test_request_properties() -> None:
    req = decode_chat_request(json.dumps(FULL_REQUEST).encode())
    assert req.is_stream and req.include_usage
    assert req.choice_count == 2
    assert req.output_ceiling == 90
    assert req.stop_sequences == ["END", "STOP"]


def test_unknown_fields_are_kept_as_sent_for_the_connections_that_allow_them() -> None:
    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body = json.dumps({**plain, "future_field": [1], "min_p": 0.05, "function_call": "auto"})
    req = decode_chat_request(body.encode())
    assert isinstance(req.native, NativeFields) and req.native.wire == CHAT_WIRE
    fields = {k: json.loads(bytes(v)) for k, v in req.native.fields.items()}
    assert fields == {"future_field": [1], "min_p": 0.05}
    assert roundtrip({**plain, "function_call": "auto"}) == {**plain, "function_call": "auto"}


def test_every_field_the_openai_sdk_sends_is_modelled() -> None:
    """What the official SDK's ``chat.completions.create`` can send is never an extra
    field (a 400 unless a connection allows it): it is typed, or forwarded as sent."""
    sent = set(inspect.signature(Completions.create).parameters)
    sent -= {"self", "extra_headers", "extra_query", "extra_body", "timeout"}
    assert sent - set(ChatRequest.__struct_fields__) == set()


HI = b'[{"role": "user", "content": "h"}]'


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b'{"model": "m", "x": 1, "messages": [], "api_key": "sk-1"}', "invalid_value", "messages"),
        (
            b'{"model": "m", "x": 1, "api_key": "k", "messages": ' + HI + b"}",
            "unsupported_parameter",
            "api_key",
        ),
        (b'{"model": "m", "x": 1, "messages": [', "invalid_json", None),
        (
            b'{"x": 1, "messages": ' + HI + b"}",
            "missing_required_parameter",
            "model",
        ),
    ],
    ids=["bad-value-after-unknown", "override-beside-unknown", "truncated", "missing"],
)
def test_a_body_with_unknown_fields_is_checked_as_any_other(
    body: bytes, code: str, param: str | None
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(body)
    assert (info.value.code, info.value.param) == (code, param)


@pytest.mark.parametrize("field", OVERRIDE_FIELDS)
def test_an_upstream_override_in_the_body_is_refused_by_name(field: str) -> None:
    doc = {"model": "m", "messages": [{"role": "user", "content": "hi"}], field: "sk-stolen-01234"}
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(json.dumps(doc).encode())
    assert (info.value.param, info.value.code) == (field, "unsupported_parameter")
    assert "sk-stolen" not in info.value.message


@pytest.mark.parametrize(
    ("depth", "refused"), [(63, False), (64, False), (65, True), (100_000, True)]
)
def test_nesting_past_the_limit_is_refused_before_decoding(depth: int, refused: bool) -> None:
    """64 levels of arrays and objects in all, the body's own object included."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": %s}' % (
        inner.encode()
    )
    if not refused:
        decode_chat_request(body)
        return
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(body)
    assert info.value.code == "json_too_deep"
    assert "64 levels" in info.value.message


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '"[[[{{{\\"' * 500  # brackets, escaped backslashes and quotes, all in strings
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
    assert decode_chat_request(body.encode()).messages[0].content == text


HI = b'[{"role": "user", "content": "h"}]'


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b"{not json", "invalid_json", None),
        (b"", "invalid_json", None),
        (b"[]", "invalid_type", None),
        (
            b'{"messages": [{"role": "user", "content": "x"}]}',
            "missing_required_parameter",
            "model",
        ),
        (b'{"model": "m"}', "missing_required_parameter", "messages"),
        (b'{"model": "m", "messages": []}', "invalid_value", "messages"),
        (b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}', "invalid_type", "model"),
        (
            b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}',
            "invalid_value",
            "messages[0].role",
        ),
        (
            b'{"model": "m", "messages": [{"content": "x"}]}',
            "missing_required_parameter",
            "messages[0].role",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": 3}]}',
            "invalid_type",
            "messages[0].content",
        ),
        (
            b'{"model": "m", "messages": [{"role": "tool", "content": "x"}]}',
            "missing_required_parameter",
            "messages[0].tool_call_id",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 0}',
            "invalid_value",
            "n",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}',
            "invalid_value",
            "temperature",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
            "invalid_type",
            "stream",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
            "invalid_value",
            "max_tokens",
        ),
    ],
    ids=[
        "malformed",
        "empty-body",
        "not-object",
        "no-model",
        "no-messages",
        "empty-messages",
        "model-type",
        "bad-role",
        "no-role",
        "content-type",
        "tool-no-id",
        "n-zero",
        "temperature-range",
        "stream-type",
        "max-tokens-zero",
    ],
)
def test_invalid_bodies_name_the_parameter(body: bytes, code: str, param: str | None) -> None:
    with pytest.raises(InvalidRequestError) as info:
        decode_chat_request(body)
    err = info.value
    assert (err.status, err.type, err.code, err.param) == (
        400,
        "invalid_request_error",
        code,
        param,
    )
    assert err.message
