"""One battery, every provider: each recorded or scripted stream keeps the shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Target, Timeouts
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.registry import PROVIDERS, AdapterRegistry
from tests.support.conformance import assert_conforms
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES, transcript

FORMAT_ALIASES = {"openai-compatible": "openai", "deepseek": "openai"}  # same wire format
FORMAT_FIXTURES = {
    spec.kind: FORMAT_ALIASES.get(spec.kind, spec.kind)
    for spec in PROVIDERS
    if (FIXTURES / FORMAT_ALIASES.get(spec.kind, spec.kind)).is_dir()
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SCRIPTED: dict[str, dict[str, Any]] = {
    "text": {"messages": [{"role": "user", "content": "hi"}]},
    "tools": {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [TOOL, {"type": "function", "function": {"name": "other"}}],
    },
    "two-choices": {"messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 3},
}


def fixture_cases() -> list[tuple[str, Path]]:
    return [
        (kind, path)
        for kind, folder in FORMAT_FIXTURES.items()
        for path in sorted((FIXTURES / folder).glob("*.raw"))
    ]


def test_every_registered_provider_is_covered() -> None:
    covered = set(FORMAT_FIXTURES) | {s.kind for s in PROVIDERS if s.local}
    assert covered == {s.kind for s in PROVIDERS}


@pytest.mark.parametrize(
    ("kind", "path"), fixture_cases(), ids=[f"{k}-{p.stem}" for k, p in fixture_cases()]
)
def test_recorded_streams_conform(kind: str, path: Path) -> None:
    adapter = AdapterRegistry(counting_ids()).adapter(kind)
    req = decode_chat_request(b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
    assert_conforms(transcript(adapter.stream(req), [path.read_bytes()]))


@pytest.mark.parametrize("kind", [s.kind for s in PROVIDERS if s.local])
@pytest.mark.parametrize("case", sorted(SCRIPTED))
def test_local_providers_conform(kind: str, case: str) -> None:
    registry = AdapterRegistry(counting_ids())
    adapter = registry.adapter(kind)
    req = decode_chat_request(json.dumps({"model": "m", "stream": True, **SCRIPTED[case]}).encode())
    conn = ConnectionSettings(
        "c", kind, "demo://local", timeouts=Timeouts(), options={"first_token_ms": 0, "token_ms": 0}
    )
    upstream = adapter.build_request(req, Target("m", kind, conn))
    assert upstream.local is not None
    pieces = [data for _, data in upstream.local.script()]
    lines = transcript(adapter.stream(req), pieces)
    assert lines[-1]["end"] == "complete"
    assert_conforms(lines)


BROKEN = [
    (
        "two-finishes",
        [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ],
    ),
    (
        "no-role-first",
        [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}],
    ),
    (
        "tool-without-name",
        [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "a",
                                    "type": "function",
                                    "function": {"arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ]
            },
        ],
    ),
    (
        "tools-finish-stop",
        [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "a",
                                    "type": "function",
                                    "function": {"name": "f", "arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ],
    ),
]


@pytest.mark.parametrize("lines", [b for _, b in BROKEN], ids=[n for n, _ in BROKEN])
def test_battery_rejects_broken_streams(lines: list[dict[str, object]]) -> None:
    with pytest.raises(AssertionError):
        assert_conforms([*lines, {"end": "complete"}])
