"""Our chat request → Gemini's URL, headers and ``GenerateContentRequest`` body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.gemini import GeminiAdapter
from tests.support.gateway import counting_ids

KEY = "AIzaSyD-0123456789abcdefghijklmnopqrstu"
CONN = ConnectionSettings(
    "conn_g",
    "gemini",
    "https://generativelanguage.googleapis.com/",
    Secret(KEY),
    timeouts=Timeouts(),
)
USER = {"role": "user", "content": "hi"}
SIGNATURE = "skip_thought_signature_validator"


def build(
    native: str = "gemini-2.5-flash", conn: ConnectionSettings = CONN, **fields: Any
) -> tuple[str, dict[str, str], dict[str, Any]]:
    doc = {"model": "google/gemini-2.5-flash", "messages": [USER], **fields}
    req = decode_chat_request(json.dumps(doc).encode())
    up = GeminiAdapter("gemini", counting_ids()).build_request(req, Target("g", native, conn))
    assert up.method == "POST"
    return up.url, up.headers, json.loads(up.body)


def body(**fields: Any) -> dict[str, Any]:
    return build(**fields)[2]


def rejected(**fields: Any) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        build(**fields)
    return info.value


# --- URL and headers ------------------------------------------------------------------


def test_stream_url_headers_and_minimal_body() -> None:
    url, headers, doc = build(stream=True)
    assert url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
        ":streamGenerateContent?alt=sse"
    )
    assert headers == {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "x-goog-api-key": KEY,
    }
    assert doc == {"contents": [{"parts": [{"text": "hi"}], "role": "user"}]}
    assert KEY not in url


def test_non_stream_url_and_headers() -> None:
    url, headers, _ = build(stream=False)
    assert url.endswith("/v1beta/models/gemini-2.5-flash:generateContent")
    assert headers == {"content-type": "application/json", "x-goog-api-key": KEY}


@pytest.mark.parametrize(
    ("native", "path"),
    [
        ("gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:generateContent"),
        ("models/gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:generateContent"),
        ("tunedModels/my-tune-01", "/v1beta/tunedModels/my-tune-01:generateContent"),
        ("odd name?#", "/v1beta/models/odd%20name%3F%23:generateContent"),
    ],
)
def test_model_path_is_quoted(native: str, path: str) -> None:
    conn = ConnectionSettings("c", "gemini", "http://127.0.0.1:9", timeouts=Timeouts())
    url, headers, _ = build(native, conn)
    assert url == "http://127.0.0.1:9" + path
    assert "x-goog-api-key" not in headers


# --- messages ---------------------------------------------------------------------------


def test_system_and_developer_messages_become_the_system_instruction() -> None:
    doc = body(
        messages=[
            {"role": "system", "content": "Be brief."},
            USER,
            {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
        ]
    )
    assert doc["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "No emoji."}]}
    assert doc["contents"] == [{"parts": [{"text": "hi"}], "role": "user"}]


def test_roles_map_and_consecutive_turns_merge() -> None:
    doc = body(
        messages=[
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "three"},
            {"role": "assistant", "content": [{"type": "text", "text": "four"}]},
            {"role": "user", "content": "five"},
        ]
    )
    assert doc["contents"] == [
        {"parts": [{"text": "one"}, {"text": "two"}], "role": "user"},
        {"parts": [{"text": "three"}, {"text": "four"}], "role": "model"},
        {"parts": [{"text": "five"}], "role": "user"},
    ]


def test_an_assistant_turn_with_nothing_to_say_is_dropped() -> None:
    doc = body(
        messages=[
            USER,
            {"role": "assistant", "content": None, "refusal": "no"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            {"role": "user", "content": "again"},
        ]
    )
    assert doc["contents"] == [{"parts": [{"text": "hi"}, {"text": "again"}], "role": "user"}]


def test_empty_texts_send_no_parts() -> None:
    doc = body(
        messages=[
            {"role": "system", "content": ""},
            {"role": "user", "content": [{"type": "text", "text": ""}]},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""},
        ]
    )
    assert doc == {"contents": [{"parts": [{"text": "hi"}], "role": "user"}]}


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_user_parts_text_images_audio_and_files() -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        image("data:image/png;base64,iVBORw0KGgo="),
        image("https://example.com/photos/cat.JPG?size=large#top"),
        image("http://example.com/chart.webp"),
        image("https://example.com/render?id=7"),
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {
            "type": "file",
            "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"},
        },
    ]
    doc = body(messages=[{"role": "user", "content": content}])
    assert doc["contents"][0]["parts"] == [
        {"text": "What is this?"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        {
            "fileData": {
                "fileUri": "https://example.com/photos/cat.JPG?size=large#top",
                "mimeType": "image/jpeg",
            }
        },
        {"fileData": {"fileUri": "http://example.com/chart.webp", "mimeType": "image/webp"}},
        {"fileData": {"fileUri": "https://example.com/render?id=7", "mimeType": "image/jpeg"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
    ]


@pytest.mark.parametrize(
    ("part", "param"),
    [
        (image("ftp://example.com/a.png"), "messages[0].content[0].image_url.url"),
        (image("data:image/png,notbase64"), "messages[0].content[0].image_url.url"),
        (image("data:;base64,AAAA"), "messages[0].content[0].image_url.url"),
        ({"type": "file", "file": {"file_id": "file-abc"}}, "messages[0].content[0].file"),
        ({"type": "input_audio", "input_audio": {"data": 5}}, "messages[0].content[0].input_audio"),
    ],
    ids=["ftp-url", "data-url-not-base64", "data-url-no-mime", "file-id", "bad-audio"],
)
def test_unusable_parts_are_rejected_with_their_param(part: dict[str, Any], param: str) -> None:
    err = rejected(messages=[{"role": "user", "content": [part]}])
    assert err.param == param


def tool_call(id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_calls_and_results_round_trip() -> None:
    doc = body(
        messages=[
            {"role": "user", "content": "Weather in Paris and the time?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    tool_call("call_a", "get_weather", '{"city": "Paris", "days": [1, 2]}'),
                    tool_call("call_b", "get_time", ""),
                ],
            },
            {"role": "tool", "tool_call_id": "call_b", "content": "14:05"},
            {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 21}'},
            {"role": "user", "content": "Thanks!"},
        ]
    )
    assert doc["contents"] == [
        {"parts": [{"text": "Weather in Paris and the time?"}], "role": "user"},
        {
            "parts": [
                {"text": "Checking."},
                {
                    "functionCall": {
                        "name": "get_weather",
                        "args": {"city": "Paris", "days": [1, 2]},
                    },
                    "thoughtSignature": SIGNATURE,
                },
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
            "role": "model",
        },
        {
            "parts": [
                {"functionResponse": {"name": "get_time", "response": {"content": "14:05"}}},
                {"functionResponse": {"name": "get_weather", "response": {"temp_c": 21}}},
                {"text": "Thanks!"},
            ],
            "role": "user",
        },
    ]


@pytest.mark.parametrize(
    ("content", "response"),
    [
        ('{"ok": true}', {"ok": True}),
        ("[1, 2]", {"content": "[1, 2]"}),
        ("42", {"content": "42"}),
        ("not json {", {"content": "not json {"}),
        ([{"type": "text", "text": '{"a":'}, {"type": "text", "text": " 1}"}], {"a": 1}),
    ],
    ids=["object", "array", "number", "text", "text-parts"],
)
def test_tool_result_is_its_object_or_wrapped_text(content: Any, response: Any) -> None:
    doc = body(
        messages=[
            USER,
            {"role": "assistant", "tool_calls": [tool_call("c1", "f", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": content},
        ]
    )
    assert doc["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "f", "response": response}}
    ]


def test_legacy_function_message_names_its_function() -> None:
    doc = body(messages=[USER, {"role": "function", "name": "lookup", "content": "found"}])
    assert doc["contents"][0]["parts"][1] == {
        "functionResponse": {"name": "lookup", "response": {"content": "found"}}
    }


def test_tool_result_without_its_call_is_rejected() -> None:
    err = rejected(messages=[USER, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert err.param == "messages[1].tool_call_id"


@pytest.mark.parametrize("arguments", ['{"city": ', "[1]", '"text"', "null"])
def test_tool_call_arguments_must_be_a_json_object(arguments: str) -> None:
    err = rejected(
        messages=[
            USER,
            {
                "role": "assistant",
                "tool_calls": [tool_call("c0", "f", "{}"), tool_call("c1", "f", arguments)],
            },
        ]
    )
    assert err.param == "messages[1].tool_calls[1].function.arguments"


# --- tools and generation settings -----------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def test_tools_become_function_declarations_with_json_schema() -> None:
    doc = body(tools=[WEATHER, {"type": "function", "function": {"name": "noop"}}])
    assert doc["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parametersJsonSchema": WEATHER["function"]["parameters"],  # type: ignore[index]
                },
                {"name": "noop"},
            ]
        }
    ]
    assert "toolConfig" not in doc


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"mode": "ANY", "allowedFunctionNames": ["get_weather"]},
        ),
    ],
    ids=["auto", "none", "required", "named"],
)
def test_tool_choice_becomes_the_function_calling_mode(choice: Any, config: Any) -> None:
    doc = body(tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False)
    assert doc["toolConfig"] == {"functionCallingConfig": config}


def test_generation_settings() -> None:
    doc = body(
        max_tokens=50,
        max_completion_tokens=300,
        stop="END",
        temperature=0.2,
        top_p=0.9,
        seed=7,
        n=2,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        user="u-1",
        logprobs=True,
        metadata={"a": "b"},
    )
    assert doc["generationConfig"] == {
        "stopSequences": ["END"],
        "maxOutputTokens": 300,
        "temperature": 0.2,
        "topP": 0.9,
        "seed": 7,
        "candidateCount": 2,
        "presencePenalty": 0.5,
        "frequencyPenalty": -0.5,
    }
    assert set(doc) == {"contents", "generationConfig"}


def test_max_tokens_and_stop_list() -> None:
    config = body(max_tokens=64, stop=["a", "b"])["generationConfig"]
    assert config == {"stopSequences": ["a", "b"], "maxOutputTokens": 64}


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("fmt", "config"),
    [
        ({"type": "text"}, None),
        ({"type": "json_object"}, {"responseMimeType": "application/json"}),
        (
            {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}},
            {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA},
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "a"}},
            {"responseMimeType": "application/json"},
        ),
    ],
    ids=["text", "json_object", "json_schema", "json_schema-without-schema"],
)
def test_response_format(fmt: Any, config: Any) -> None:
    assert body(response_format=fmt).get("generationConfig") == config


@pytest.mark.parametrize(
    ("effort", "thinking"),
    [
        ("none", {"thinkingBudget": 0}),
        ("minimal", {"thinkingBudget": 512, "includeThoughts": True}),
        ("low", {"thinkingBudget": 1024, "includeThoughts": True}),
        ("medium", {"thinkingBudget": 8192, "includeThoughts": True}),
        ("high", {"thinkingBudget": 24576, "includeThoughts": True}),
        ("xhigh", {"thinkingBudget": 24576, "includeThoughts": True}),
    ],
)
def test_reasoning_effort_becomes_a_thinking_budget(effort: str, thinking: Any) -> None:
    assert body(reasoning_effort=effort)["generationConfig"] == {"thinkingConfig": thinking}


def test_unknown_reasoning_effort_is_rejected() -> None:
    assert rejected(reasoning_effort="extreme").param == "reasoning_effort"
