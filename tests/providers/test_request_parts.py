"""One reading of ``data:`` URLs and tool-call arguments for every provider.

The three providers used to parse ``data:`` URLs each their own way; these pin the
shared reading where they differed (parameters, case, a missing media type, ``base64``
not last, a missing ``data:``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target
from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.anthropic import AnthropicAdapter
from sluice.providers.bedrock.request import converse_body
from sluice.providers.gemini import GeminiAdapter
from sluice.providers.request_parts import DataUrl, parse_data_url, tool_arguments_object
from sluice.wire.chat import ChatRequest
from tests.support.gateway import counting_ids


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("data:image/png;base64,AAAA", DataUrl("image/png", "AAAA")),
        ("data:image/png;name=a.png;base64,AAAA", DataUrl("image/png", "AAAA")),
        ("data:IMAGE/PNG;base64,AAAA", DataUrl("image/png", "AAAA")),
        ("data:image/png;base64,", DataUrl("image/png", "")),
        ("data:image/png,AAAA", None),
        ("data:image/png;base64;name=a,AAAA", None),
        ("data:image/png;charset;base64,AAAA", None),
        ("data:;base64,AAAA", None),
        ("data:png;base64,AAAA", None),
        ("data:image/;base64,AAAA", None),
        ("image/png;base64,AAAA", None),
        ("data:image/png;base64", None),
        ("https://example.com/a.png", None),
    ],
    ids=[
        "plain",
        "parameters-dropped",
        "lowercased",
        "empty-data-is-the-callers-call",
        "not-base64",
        "base64-not-last",
        "parameter-without-value",
        "no-media-type",
        "no-subtype",
        "empty-subtype",
        "no-data-scheme",
        "no-comma",
        "link",
    ],
)
def test_parse_data_url(url: str, expected: DataUrl | None) -> None:
    assert parse_data_url(url) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [("", {}), ("  \n", {}), ('{"a": [1]}', {"a": [1]}), (' {"b": null} ', {"b": None})],
)
def test_tool_arguments_object(arguments: str, expected: dict[str, Any]) -> None:
    assert tool_arguments_object(arguments, "p") == expected


@pytest.mark.parametrize("arguments", ["{", "[1]", '"x"', "null", "3"])
def test_tool_arguments_that_are_not_an_object_are_refused(arguments: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        tool_arguments_object(arguments, "messages[1].tool_calls[0].function.arguments")
    assert info.value.param == "messages[1].tool_calls[0].function.arguments"
    assert str(info.value) == "Tool call arguments must be a JSON object."


# --- every provider reads a data: URL the same way -----------------------------------


def _anthropic(req: ChatRequest) -> dict[str, Any]:
    conn = ConnectionSettings("a", "anthropic", "https://api.anthropic.com", Secret("k"))
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(req, Target("m", "c", conn))
    source: dict[str, Any] = json.loads(up.body)["messages"][0]["content"][0]["source"]
    return source


def _gemini(req: ChatRequest) -> dict[str, Any]:
    conn = ConnectionSettings("g", "gemini", "https://g.example/", Secret("k"))
    up = GeminiAdapter("gemini", counting_ids()).build_request(req, Target("m", "g", conn))
    blob: dict[str, Any] = json.loads(up.body)["contents"][0]["parts"][0]["inlineData"]
    return blob


def _bedrock(req: ChatRequest) -> dict[str, Any]:
    content = json.loads(converse_body(req, "b"))["messages"][0]["content"]
    image: dict[str, Any] = content[0]["image"]
    return image


def _image_request(url: str) -> ChatRequest:
    part = {"type": "image_url", "image_url": {"url": url}}
    doc = {"model": "m", "messages": [{"role": "user", "content": [part]}]}
    return decode_chat_request(json.dumps(doc).encode())


BUILDERS: dict[str, Callable[[ChatRequest], dict[str, Any]]] = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock": _bedrock,
}
ACCEPTED = {
    "anthropic": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    "gemini": {"mimeType": "image/png", "data": "AAAA"},
    "bedrock": {"format": "png", "source": {"bytes": "AAAA"}},
}


@pytest.mark.parametrize("provider", BUILDERS)
@pytest.mark.parametrize(
    "url", ["data:image/png;name=a.png;base64,AAAA", "data:Image/PNG;base64,AAAA"]
)
def test_data_url_parameters_are_dropped_and_the_media_type_lowercased(
    provider: str, url: str
) -> None:
    assert BUILDERS[provider](_image_request(url)) == ACCEPTED[provider]


@pytest.mark.parametrize("provider", BUILDERS)
@pytest.mark.parametrize(
    "url",
    ["data:image/png;base64;name=a,AAAA", "data:;base64,AAAA", "data:png;base64,AAAA"],
    ids=["base64-not-last", "no-media-type", "no-subtype"],
)
def test_malformed_data_urls_are_refused_by_every_provider(provider: str, url: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        BUILDERS[provider](_image_request(url))
    assert info.value.param is not None
    assert info.value.param.startswith("messages[0].content[0].image_url")


def test_gemini_file_data_needs_the_data_scheme() -> None:
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": "application/pdf;base64,J"}}
    doc = {"model": "m", "messages": [{"role": "user", "content": [part]}]}
    with pytest.raises(InvalidRequestError) as info:
        _gemini(decode_chat_request(json.dumps(doc).encode()))
    assert info.value.param == "messages[0].content[0].file.file_data"
