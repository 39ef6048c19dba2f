"""The built-in demo provider: deterministic, honours the request, paced."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Target, Timeouts
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.demo import INTRO, DemoAdapter
from tests.support.gateway import counting_ids
from tests.support.transcript import transcript

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"enum": ["c", "f"]},
                "hourly": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time"}}


def run(body: dict[str, Any], **options: float) -> tuple[list[dict[str, Any]], list[float]]:
    adapter = DemoAdapter("demo", counting_ids())
    req = decode_chat_request(
        json.dumps(
            {
                "model": "sluice/demo",
                "stream": True,
                "messages": [{"role": "user", "content": "Hi"}],
                **body,
            }
        ).encode()
    )
    conn = ConnectionSettings(
        "conn_demo",
        "demo",
        "demo://local",
        timeouts=Timeouts(),
        options=options or {"first_token_ms": 0, "token_ms": 0},
    )
    upstream = adapter.build_request(req, Target("sluice/demo", "demo", conn))
    assert upstream.local is not None
    steps = list(upstream.local.script())
    return transcript(adapter.stream(req), [d for _, d in steps]), [p for p, _ in steps]


def text_of(lines: list[dict[str, Any]], index: int = 0) -> str:
    return "".join(
        line["choices"][0]["delta"].get("content", "")
        for line in lines[:-1]
        if line["choices"][0]["index"] == index
    )


def finish_of(lines: list[dict[str, Any]], index: int = 0) -> str:
    return str(
        next(
            line["choices"][0]["finish_reason"]
            for line in lines[:-1]
            if line["choices"][0]["index"] == index and line["choices"][0]["finish_reason"]
        )
    )


def test_answer_is_deterministic_echoes_the_user_and_reports_usage() -> None:
    lines, _ = run({"messages": [{"role": "user", "content": "tell me about streams"}]})
    assert text_of(lines) == f"{INTRO} You said: tell me about streams"
    assert finish_of(lines) == "stop"
    usage = lines[-1]["usage"]
    assert usage["completion_tokens"] == len(text_of(lines).split())
    assert usage["prompt_tokens"] > 0
    assert run({"messages": [{"role": "user", "content": "tell me about streams"}]})[0] == lines


def test_max_tokens_truncates_with_length() -> None:
    lines, _ = run({"max_tokens": 4})
    assert len(text_of(lines).split()) == 4
    assert finish_of(lines) == "length"
    assert lines[-1]["usage"]["completion_tokens"] == 4


def test_stop_sequence_cuts_before_it() -> None:
    lines, _ = run({"stop": ["demo"]})
    assert text_of(lines) == INTRO[: INTRO.index("demo")]
    assert finish_of(lines) == "stop"


def test_n_choices_are_interleaved_by_index() -> None:
    lines, _ = run({"n": 3, "max_tokens": 2})
    indexes = [line["choices"][0]["index"] for line in lines[:-1]]
    assert indexes[:6] == [0, 0, 1, 1, 2, 2]  # role and first token of each, in turn
    assert {finish_of(lines, i) for i in range(3)} == {"length"}
    assert text_of(lines, 1) == text_of(lines, 2)  # same two tokens for every choice


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"tools": [WEATHER, CLOCK]}, ["get_weather", "get_time"]),
        ({"tools": [WEATHER, CLOCK], "parallel_tool_calls": False}, ["get_weather"]),
        (
            {
                "tools": [WEATHER, CLOCK],
                "tool_choice": {"type": "function", "function": {"name": "get_time"}},
            },
            ["get_time"],
        ),
        ({"tools": [WEATHER], "tool_choice": "none"}, []),
    ],
    ids=["parallel", "single", "named", "none"],
)
def test_tool_calls_follow_the_request(body: dict[str, Any], names: list[str]) -> None:
    lines, _ = run(body)
    calls: dict[int, dict[str, str]] = {}
    for line in lines[:-1]:
        for call in line["choices"][0]["delta"].get("tool_calls", []):
            entry = calls.setdefault(call["index"], {"name": "", "arguments": ""})
            entry["name"] += call["function"].get("name", "")
            entry["arguments"] += call["function"]["arguments"]
    assert [calls[i]["name"] for i in sorted(calls)] == names
    if names:
        assert finish_of(lines) == "tool_calls"
    if "get_weather" in names:
        assert len(lines) > 6  # long arguments arrive in several fragments
        args = json.loads(calls[0]["arguments"])
        assert args == {"city": "demo", "days": 1, "unit": "c", "hourly": True, "tags": ["demo"]}


def test_after_a_tool_result_it_answers_in_text() -> None:
    lines, _ = run(
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"},
            ],
        }
    )
    assert text_of(lines) == "The tool answered: sunny, 21C"


def test_pace_first_token_then_one_token_per_step() -> None:
    _, pauses = run({"max_tokens": 5}, first_token_ms=200, token_ms=50)
    assert pauses == [0.2, 0.05, 0.05, 0.05, 0.05]


def test_non_stream_completion_matches_the_stream() -> None:
    adapter = DemoAdapter("demo", counting_ids())
    req = decode_chat_request(
        b'{"model": "sluice/demo", "max_tokens": 6, '
        b'"messages": [{"role": "user", "content": "Hi"}]}'
    )
    conn = ConnectionSettings(
        "conn_demo",
        "demo",
        "demo://local",
        timeouts=Timeouts(),
        options={"first_token_ms": 0, "token_ms": 0},
    )
    upstream = adapter.build_request(req, Target("sluice/demo", "demo", conn))
    assert upstream.local is not None
    ((_pause, body),) = list(upstream.local.script())
    parsed = adapter.parse_response(200, {}, body)
    assert parsed.choices[0].message.content == " ".join(INTRO.split()[:6]) + " "
    assert parsed.choices[0].finish_reason == "length"
    assert parsed.usage is not None and parsed.usage.completion_tokens == 6
