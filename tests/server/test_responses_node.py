"""``POST /v1/responses`` and stored responses read by the official ``openai`` SDK on
Node, unchanged (``tests/node/openai_responses.mjs``), over real sockets: the Node side
of test_responses_sdk.py and test_responses_stored.py.

One gateway with a fake OpenAI-compatible upstream and a fake Anthropic one; one Node
process runs every scenario in order against the replies queued for them and prints
what the SDK saw; one test per scenario checks it and what the upstreams were sent.
``responses.create({stream: true})`` iterated to ``response.completed`` and
``responses.stream()``'s ``finalResponse()`` with text and with a function call, on
each upstream; ``previous_response_id`` over three turns, the second on Anthropic and
the third back on the OpenAI-compatible one; ``retrieve``, ``inputItems.list`` paged
one item at a time, ``delete`` and the 404s after it. Node or the pinned package
absent: these tests skip, except under ``CI=true``, where they fail (``make test``
installs the package: scripts/deps.sh).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agents.cli import run_program
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.fake_openai import DONE, chunk, completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.node import NODE_DIR, pinned_node

OPENAI, CLAUDE = "test/gpt-fake", "test/claude"
UPSTREAM = {OPENAI: "openai", CLAUDE: "anthropic"}  # model → the fake that answers it
PROVIDER = {OPENAI: "openai-compatible", CLAUDE: "anthropic"}
CALL_ID = {OPENAI: "call_1", CLAUDE: "toolu_9"}  # the id each upstream gives its call
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
CITY = '{"city":"Oslo"}'
TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
CONVERSATION = f"conversation:{OPENAI}+{CLAUDE}+{OPENAI}"
STORED = f"stored:{OPENAI}"
STREAMED = ("create_stream", "stream_text", "stream_tool")
SCENARIOS = tuple(f"{name}:{model}" for name in STREAMED for model in (OPENAI, CLAUDE))
SCENARIOS += (CONVERSATION, STORED)
Plan = list[tuple[str, Reply]]  # a scenario's upstream calls in order: (fake, its reply)


def text(model: str) -> Reply:
    """'Hello', ' world' streamed, 10 tokens in and 2 out."""
    if model == OPENAI:
        return Reply.stream(*text_stream("Hello", " world", usage=USAGE))
    end = fa.message_end("end_turn", fa.usage(10, 2))
    return Reply.stream(fa.message_start(10), *fa.text_block(0, "Hello", " world"), *end)


def weather_call(model: str) -> Reply:
    """A get_weather call streamed, its arguments in two pieces."""
    pieces = ('{"city":', '"Oslo"}')
    if model == CLAUDE:
        block = fa.tool_block(0, CALL_ID[CLAUDE], "get_weather", *pieces)
        return Reply.stream(
            fa.message_start(10), *block, *fa.message_end("tool_use", fa.usage(10, 2))
        )
    call = {"index": 0, "id": CALL_ID[OPENAI], "type": "function"}
    return Reply.stream(
        chunk(role="assistant", content=""),
        chunk(tool_calls=[{**call, "function": {"name": "get_weather", "arguments": ""}}]),
        *(chunk(tool_calls=[{"index": 0, "function": {"arguments": p}}]) for p in pieces),
        *(chunk(finish="tool_calls"), chunk(usage=USAGE, choices=False), DONE),
    )


def plan() -> dict[str, Plan]:
    function = {"name": "get_weather", "arguments": CITY}
    call = {"id": "call_1", "type": "function", "function": function}
    called = completion(None, tool_calls=[call], finish="tool_calls", usage=USAGE)
    steps = {f"{name}:{m}": [(UPSTREAM[m], text(m))] for name in STREAMED[:2] for m in UPSTREAM}
    steps |= {f"stream_tool:{m}": [(UPSTREAM[m], weather_call(m))] for m in UPSTREAM}
    steps[CONVERSATION] = [
        ("openai", Reply.json(called)),
        ("anthropic", Reply.json(fa.whole_message({"type": "text", "text": "Oslo is 4 degrees."}))),
        ("openai", Reply.stream(*text_stream("You asked ", "about Oslo.", usage=USAGE))),
    ]
    steps[STORED] = [("openai", Reply.json(completion("Hello back.", usage=USAGE)))]
    return steps


@dataclass
class Run:
    seen: dict[str, Any] = field(default_factory=dict)  # scenario → what the SDK saw
    sent: dict[str, list[Recorded]] = field(default_factory=dict)  # the upstream calls
    stderr: str = ""


async def run_node(node: str, home: Path) -> Run:
    fakes = {"openai": FakeUpstream(), "anthropic": FakeUpstream()}
    steps = plan()
    async with AsyncExitStack() as stack:
        for fake in fakes.values():
            await fake.start()
            stack.push_async_callback(fake.close)
        for scenario in SCENARIOS:
            for upstream, reply in steps[scenario]:
                fakes[upstream].queue(reply)
        openai, claude = fakes["openai"], fakes["anthropic"]
        config = openai_connection_toml(openai.base_url) + anthropic_toml(claude)
        gw = await stack.enter_async_context(running_gateway(home, config))
        assert gw.dev_key is not None
        # the SDK reads OPENAI_* (a base URL, an organization, a logger): none of it
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env |= {"SLUICE_BASE_URL": gw.base_url + "/v1", "SLUICE_KEY": gw.dev_key.key}
        env |= {"SLUICE_SCENARIOS": ",".join(SCENARIOS)}
        script = [str(NODE_DIR / "openai_responses.mjs")]
        code, out, err = await run_program(node, script, home / "cwd", env)
    run = Run(stderr=f"exit {code}: {err}")
    run.seen = {doc["scenario"]: doc for doc in map(json.loads, out.splitlines())}
    for scenario in SCENARIOS:  # each fake's requests, in the order they were queued
        calls = (fakes[upstream].requests for upstream, _ in steps[scenario])
        run.sent[scenario] = [requests.pop(0) for requests in calls if requests]
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    node = pinned_node("openai")
    return asyncio.run(run_node(node, tmp_path_factory.mktemp("responses-node")))


def seen_in(run: Run, scenario: str) -> Any:
    seen = run.seen.get(scenario)
    assert seen is not None and "crash" not in seen, (seen, run.stderr)
    return seen


def output_text(response: Any) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def tokens(response: Any) -> tuple[int, int, int]:
    usage = response["usage"]
    return usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]


def check_text_response(model: str, response: Any) -> None:
    assert response["object"] == "response" and response["status"] == "completed"
    assert response["id"].startswith("resp_")
    assert (response["model"], response["provider"]) == (model, PROVIDER[model])
    assert output_text(response) == "Hello world"
    assert tokens(response) == (10, 2, 12)


@pytest.mark.parametrize("model", [OPENAI, CLAUDE])
def test_create_with_stream_is_iterated_to_response_completed(run: Run, model: str) -> None:
    seen = seen_in(run, f"create_stream:{model}")
    assert seen["events"] == TEXT_EVENTS
    assert seen["sequence"] == list(range(len(TEXT_EVENTS)))
    assert seen["texts"] == ["Hello", " world"]
    check_text_response(model, seen["completed"])
    [sent] = run.sent[f"create_stream:{model}"]
    assert sent.json()["stream"] is True


@pytest.mark.parametrize("model", [OPENAI, CLAUDE])
def test_the_stream_helpers_final_response_holds_the_text(run: Run, model: str) -> None:
    seen = seen_in(run, f"stream_text:{model}")
    assert seen["events"] == TEXT_EVENTS
    assert seen["texts"] == ["Hello", " world"]  # the SDK's own event emitter
    final = seen["final"]
    check_text_response(model, final)
    assert final["output_text"] == "Hello world"  # added by the SDK


@pytest.mark.parametrize("model", [OPENAI, CLAUDE])
def test_the_stream_helpers_final_response_holds_the_function_call(run: Run, model: str) -> None:
    seen = seen_in(run, f"stream_tool:{model}")
    events = seen["events"]
    assert events[:3] == TEXT_EVENTS[:3]
    assert events[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert set(events[3:-3]) == {"response.function_call_arguments.delta"}
    assert "".join(seen["argumentDeltas"]) == seen["argumentsDone"] == CITY
    final = seen["final"]
    assert final["status"] == "completed" and final["output_text"] == ""
    [call] = final["output"]
    assert (call["type"], call["name"], call["call_id"]) == (
        "function_call",
        "get_weather",
        CALL_ID[model],
    )
    assert json.loads(call["arguments"]) == {"city": "Oslo"} and call["id"]
    [sent] = run.sent[f"stream_tool:{model}"]
    choice = sent.json()["tool_choice"]
    if model == OPENAI:
        assert choice == {"type": "function", "function": {"name": "get_weather"}}
    else:
        assert choice == {"type": "tool", "name": "get_weather"}


def test_previous_response_id_continues_three_turns_across_providers(run: Run) -> None:
    seen = seen_in(run, CONVERSATION)
    one, two, three = seen["turns"]
    assert [turn["provider"] for turn in seen["turns"]] == [
        "openai-compatible",
        "anthropic",
        "openai-compatible",
    ]
    [call] = one["output"]
    assert (call["type"], call["call_id"], call["arguments"]) == ("function_call", "call_1", CITY)
    assert (two["previous_response_id"], two["output_text"]) == (one["id"], "Oslo is 4 degrees.")
    assert three["previous_response_id"] == two["id"]
    assert three["output_text"] == "You asked about Oslo."
    assert [item["type"] for item in seen["items"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    _, to_claude, last = (request.json()["messages"] for request in run.sent[CONVERSATION])
    question = {"type": "text", "text": "Weather in Oslo?"}
    assert to_claude[0] == {"role": "user", "content": [question]}
    assert to_claude[1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    [result] = to_claude[2]["content"]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", "call_1")
    assert "4 C" in json.dumps(result["content"])
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "user"]
    assert last[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": CITY}
    assert last[2] == {"role": "tool", "content": "4 C", "tool_call_id": "call_1"}
    assert last[3]["content"] == "Oslo is 4 degrees."
    assert "Which city did I ask about?" in json.dumps(last[4]["content"])


def item_text(item: Any) -> str:
    [part] = item["content"]
    return str(part["text"])


def test_a_stored_response_is_retrieved_paged_and_deleted(run: Run) -> None:
    seen = seen_in(run, STORED)
    made = seen["made"]
    assert made["store"] is True and made["output_text"] == "Hello back."
    assert seen["retrieved"] == made
    assert [item_text(item) for item in seen["newestFirst"]] == ["More", "Hi!", "Hello"]
    pages = seen["pages"]  # the SDK's own cursor: after = the last item's id
    assert [[item_text(item) for item in page["data"]] for page in pages] == [
        ["Hello"],
        ["Hi!"],
        ["More"],
    ]
    assert [(page["has_more"], page["next"]) for page in pages] == [
        (True, True),
        (True, True),
        (False, False),
    ]
    assert len({page["data"][0]["id"] for page in pages}) == 3
    assert seen["deleted"] == {
        "status": 200,
        "body": {"id": made["id"], "object": "response.deleted", "deleted": True},
    }
    for call, outcome in seen["after"].items():
        error = outcome.get("error")
        assert error is not None, (call, outcome)
        assert (error["class"], error["status"]) == ("NotFoundError", 404), call
        assert {"NotFoundError", "APIError"} <= set(error["instanceOf"]), call
        assert error["code"] == "response_not_found" and made["id"] in error["message"], call
    [sent] = run.sent[STORED]
    messages = sent.json()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"] == "Be brief."


@pytest.mark.parametrize(
    ("node", "installed", "ci", "outcome", "reason"),
    [
        (None, None, "", pytest.skip.Exception, "node is not installed"),
        (None, None, "true", pytest.fail.Exception, "CI=true requires it"),
        ("/usr/bin/node", None, "", pytest.skip.Exception, "openai is not installed"),
        ("/usr/bin/node", "0.0.1", "", pytest.skip.Exception, "not the pinned openai"),
        ("/usr/bin/node", "0.0.1", "true", pytest.fail.Exception, "CI=true requires it"),
    ],
    ids=["no-node", "no-node-ci", "no-sdk", "stale-sdk", "stale-sdk-ci"],
)
def test_a_missing_node_or_sdk_skips_but_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    node: str | None,
    installed: str | None,
    ci: str,
    outcome: type[BaseException],
    reason: str,
) -> None:
    if installed is not None:
        (tmp_path / "openai").mkdir()
        (tmp_path / "openai" / "package.json").write_text(json.dumps({"version": installed}))
    monkeypatch.setattr(shutil, "which", lambda *_, **__: node)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=reason):
        pinned_node("openai", modules=tmp_path)
