"""``POST /v1/messages`` read by the official ``@anthropic-ai/sdk`` on Node, unchanged
(``tests/node/messages.mjs``), over real sockets: the scenarios of test_messages_sdk.py
against the demo and fake OpenAI-compatible, Anthropic, Gemini and Bedrock upstreams.

Each upstream gets one gateway and one Node process, which runs that upstream's
scenarios in order against the replies queued for them and prints what the SDK saw;
one test per (upstream, scenario) checks it. Node or the pinned package absent: these
tests skip, except under ``CI=true``, where they fail (``make test`` installs the
package: scripts/deps.sh).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.server.test_bedrock_gateway import bedrock_toml
from tests.server.test_gemini_gateway import gemini_toml
from tests.server.test_messages_sdk import SIGNATURE, USAGE, thinking_stream
from tests.support import fake_anthropic as fa
from tests.support import fake_bedrock as fb
from tests.support import fake_gemini as fg
from tests.support.fake_openai import DONE, chunk, completion, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Recorded, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.transcript import FIXTURES

NODE_DIR = Path(__file__).parents[1] / "node"
SDK = NODE_DIR / "node_modules" / "@anthropic-ai" / "sdk" / "package.json"
AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG"}
AWS |= {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
AWS |= {"AWS_EC2_METADATA_DISABLED": "true"}
WEATHER = {"city": "Oslo"}
Plan = dict[str, Reply]  # scenario → the upstream's reply; none: it asks nothing
# the order a Node process runs them in: the upstream failures last, after the answers
SCENARIOS: tuple[str, ...] = ("create", "stream", "tool", "thinking", "conversation")
SCENARIOS += ("not_found", "auth", "mid_stream", "rate_limit")


def node_binary() -> str:
    """The node that runs the script, when it and the pinned SDK are installed."""
    pinned = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    found, problem = shutil.which("node"), None
    if found is None:
        problem = "node is not installed"
    elif not SDK.exists():
        problem = "@anthropic-ai/sdk is not installed in tests/node"
    elif json.loads(SDK.read_text())["version"] != pinned["@anthropic-ai/sdk"]:
        problem = "tests/node/node_modules is stale (not the pinned @anthropic-ai/sdk)"
    if found is None or problem is not None:
        message = f"{problem} (make test installs it: scripts/deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " — CI=true requires it")
        pytest.skip(message)
    return found


def openai_plan() -> Plan:
    call = {"index": 0, "id": "call_1", "type": "function"}
    start, end = chunk(role="assistant", content=""), chunk(usage=USAGE, choices=False)
    return {
        "create": Reply.json(completion("Hello there", usage=USAGE)),
        "stream": Reply.stream(*text_stream("Hello", " world", usage=USAGE)),
        "tool": Reply.stream(
            start,
            chunk(tool_calls=[{**call, "function": {"name": "get_weather", "arguments": ""}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city":'}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
            *(chunk(finish="tool_calls"), end, DONE),
        ),
        "thinking": Reply.stream(
            *(start, chunk(reasoning="Two plus two."), chunk(content="4")),
            *(chunk(finish="stop"), end, DONE),
        ),
        "conversation": Reply.json(completion("Sunny.", usage=USAGE)),
        "mid_stream": Reply.stream(start, chunk(content="Hel"), Cut()),
        "rate_limit": Reply.json({"error": {"message": "slow down", "type": "rate_limit"}}, 429),
    }


def anthropic_plan() -> Plan:
    final, start = fa.usage(10, 2), fa.message_start(10)
    text = {"type": "text", "text": ""}
    return {
        "create": Reply.json(fa.message([{**text, "text": "Hello there"}], final_usage=final)),
        "stream": Reply.stream(*fa.text_stream("Hello", " world", final_usage=final)),
        "tool": Reply.stream(
            start,
            *fa.tool_block(0, "toolu_9", "get_weather", '{"city":', '"Oslo"}'),
            *fa.message_end("tool_use", final),
        ),
        "thinking": Reply.stream(*thinking_stream()),
        "conversation": Reply.json(fa.message([{**text, "text": "Sunny."}], final_usage=final)),
        "mid_stream": Reply.stream(
            *(start, fa.block_start(0, text)),
            fa.block_delta(0, {"type": "text_delta", "text": "Hel"}),
            fa.error_event("overloaded_error", "Overloaded"),
        ),
        "rate_limit": Reply.json(fa.error_body("rate_limit_error", "slow down"), 429),
    }


def gemini_plan() -> Plan:
    def answer(*parts: dict[str, Any], finish: str | None = "STOP") -> dict[str, Any]:
        return fg.response(fg.candidate(*parts, finish=finish), usage=fg.usage(10, 2))

    thought = fg.event(answer(fg.text("Two plus two.", thought=True), finish=None))
    return {
        "create": Reply.json(answer(fg.text("Hello there"))),
        "stream": Reply.stream(*fg.text_stream("Hello", " world", usage=fg.usage(10, 2))),
        "tool": Reply.stream(fg.event(answer(fg.call("get_weather", WEATHER)))),
        "thinking": Reply.stream(thought, fg.event(answer(fg.text("4")))),
        "conversation": Reply.json(answer(fg.text("Sunny."))),
        "mid_stream": Reply.stream((FIXTURES / "gemini" / "error_midstream.raw").read_bytes()),
        "rate_limit": Reply.json(fg.error(429, "Quota exceeded.", "RESOURCE_EXHAUSTED"), 429),
    }


def bedrock_plan() -> Plan:
    usage = {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}
    midstream = (FIXTURES / "aws-bedrock" / "error_midstream.raw").read_bytes()
    return {
        "create": Reply.json(fb.converse_response([{"text": "Hello there"}], usage=usage)),
        "stream": fb.stream_reply(*fb.text_stream("Hello", " world", usage=(10, 2))),
        "tool": fb.stream_reply(
            *(fb.message_start(), fb.tool_start(0, "tooluse_1", "get_weather")),
            *(fb.tool_delta(0, '{"city":'), fb.tool_delta(0, '"Oslo"}'), fb.block_stop(0)),
            *(fb.message_stop("tool_use"), fb.metadata(10, 2)),
        ),
        "thinking": fb.stream_reply(
            *(fb.message_start(), fb.reasoning_delta(0, text="Two plus two.")),
            *(fb.reasoning_delta(0, signature=SIGNATURE), fb.block_stop(0)),
            *(fb.text_delta("4", 1), fb.block_stop(1), fb.message_stop(), fb.metadata(10, 2)),
        ),
        "conversation": Reply.json(fb.converse_response([{"text": "Sunny."}], usage=usage)),
        "mid_stream": fb.stream_reply(midstream),
        "rate_limit": fb.error_reply(429, "ThrottlingException", "Too many requests"),
    }


@dataclass(frozen=True)
class Upstream:
    model: str
    provider: str
    config: Callable[[FakeUpstream], str]
    plan: Callable[[], Plan]
    tool_id: str = ""  # the tool_use id the upstream chose ("": the gateway makes one)
    signature: str = ""  # the thinking block's signature, where the provider signs
    mid_stream: tuple[str, str] = ("Hel", "api_error")  # the text before the error; its type
    scenarios: tuple[str, ...] = SCENARIOS


def openai_toml(fake: FakeUpstream) -> str:
    return openai_connection_toml(fake.base_url)


# the text each upstream's failing stream gets out before the error, and the error's type
HEL, PARTIAL = ("Hel", "overloaded_error"), ("Partial", "overloaded_error")
PARTIAL_ANSWER = ("Partial answer", "api_error")
DEMO = ("create", "stream", "tool", "not_found", "auth")
UPSTREAMS = {
    "demo": Upstream("sluice/demo", "demo", lambda _: "", dict, scenarios=DEMO),
    "openai": Upstream("test/gpt-fake", "openai-compatible", openai_toml, openai_plan, "call_1"),
    "anthropic": Upstream(
        "test/claude", "anthropic", anthropic_toml, anthropic_plan, "toolu_9", SIGNATURE, HEL
    ),
    "gemini": Upstream(
        "google/gemini-test", "gemini", gemini_toml, gemini_plan, mid_stream=PARTIAL
    ),
    "bedrock": Upstream(
        "test/claude-bedrock",
        "aws-bedrock",
        bedrock_toml,
        bedrock_plan,
        "tooluse_1",
        SIGNATURE,
        PARTIAL_ANSWER,
    ),
}
AS_SENT = "the turns the SDK sent"
REASONED = {"reasoningText": {"text": "Use the tool.", "signature": SIGNATURE}}
SENT: dict[tuple[str, str], list[tuple[tuple[str | int, ...], Any]]] = {
    # (upstream, scenario) → (a path into the body the upstream got, what is there)
    ("openai", "tool"): [(("tool_choice", "function", "name"), "get_weather")],
    ("openai", "thinking"): [(("reasoning_effort",), "low")],  # 2000 tokens: the nearest
    ("openai", "conversation"): [
        (("messages", 1, "content"), None),  # the signed thinking is dropped
        (("messages", 1, "tool_calls", 0, "function", "arguments"), '{"city":"Oslo"}'),
        (("messages", 2), {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1"}),
    ],
    ("anthropic", "tool"): [(("tool_choice",), {"type": "tool", "name": "get_weather"})],
    ("anthropic", "thinking"): [(("thinking",), {"type": "enabled", "budget_tokens": 2000})],
    ("anthropic", "conversation"): [(("messages",), AS_SENT)],  # signature and all
    ("gemini", "tool"): [(("toolConfig", "functionCallingConfig", "mode"), "ANY")],
    ("gemini", "thinking"): [(("generationConfig", "thinkingConfig", "thinkingBudget"), 2000)],
    ("gemini", "conversation"): [
        (("contents", 1, "parts", 0, "functionCall"), {"name": "get_weather", "args": WEATHER}),
        (("contents", 2, "parts", 0, "functionResponse", "response"), {"content": "sunny"}),
    ],
    ("bedrock", "tool"): [(("toolConfig", "toolChoice"), {"tool": {"name": "get_weather"}})],
    ("bedrock", "thinking"): [
        (("additionalModelRequestFields", "thinking", "budget_tokens"), 2000)
    ],
    ("bedrock", "conversation"): [
        (("messages", 1, "content", 0, "reasoningContent"), REASONED),
        (("messages", 2, "content", 0, "toolResult", "toolUseId"), "toolu_1"),
    ],
}


@dataclass
class Run:
    seen: dict[str, Any] = field(default_factory=dict)  # scenario → what the SDK saw
    sent: dict[str, list[Recorded]] = field(default_factory=dict)  # what the upstream got
    stderr: str = ""


async def run_node(node: str, name: str, home: Path) -> Run:
    spec, fake = UPSTREAMS[name], FakeUpstream()
    plan = spec.plan()
    await fake.start()
    try:
        fake.queue(*(plan[scenario] for scenario in spec.scenarios if scenario in plan))
        async with running_gateway(home, spec.config(fake)) as gw:
            assert gw.dev_key is not None
            # the SDK reads ANTHROPIC_* (a second credential, a logger on stdout): none of it
            env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
            env |= {"SLUICE_BASE_URL": gw.base_url, "SLUICE_KEY": gw.dev_key.key}
            env |= {"SLUICE_MODEL": spec.model, "SLUICE_SCENARIOS": ",".join(spec.scenarios)}
            pipe = asyncio.subprocess.PIPE
            process = await asyncio.create_subprocess_exec(
                node, str(NODE_DIR / "messages.mjs"), env=env, stdout=pipe, stderr=pipe
            )
            try:
                out, err = await asyncio.wait_for(process.communicate(), 30)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    finally:
        await fake.close()
    run = Run(stderr=err.decode(errors="replace"))
    run.seen = {doc["scenario"]: doc for doc in map(json.loads, out.decode().splitlines())}
    for scenario in spec.scenarios:
        count = int(scenario in plan)
        run.sent[scenario], fake.requests = fake.requests[:count], fake.requests[count:]
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """Each upstream's run, made the first time one of its tests asks."""
    node = node_binary()
    done: dict[str, Run] = {}

    def run(name: str) -> Run:
        if name not in done:
            with pytest.MonkeyPatch.context() as env:  # AWS credentials from the environment
                for variable, value in AWS.items():
                    env.setenv(variable, value)
                for variable in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
                    env.delenv(variable, raising=False)
                done[name] = asyncio.run(run_node(node, name, tmp_path_factory.mktemp(name)))
        return done[name]

    return run


def blocks(message: Any) -> list[tuple[str, str]]:
    return [(b["type"], b.get("text") or b.get("thinking", "")) for b in message["content"]]


def check_create(spec: Upstream, seen: Any) -> None:
    message = seen["message"]
    assert message["id"] == seen["requestId"]  # the X-Request-Id header
    assert (message["type"], message["role"]) == ("message", "assistant")
    assert (message["model"], message["provider"]) == (spec.model, spec.provider)
    assert message["stop_reason"] == "end_turn"
    if spec.provider == "demo":  # its own words, however long they run
        [(kind, text)] = blocks(message)
        assert kind == "text" and text and message["usage"]["output_tokens"] > 0
        return
    assert blocks(message) == [("text", "Hello there")]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (10, 2)


def check_stream(spec: Upstream, seen: Any) -> None:
    final, ending = seen["message"], seen["ending"]
    assert blocks(final) == [("text", "".join(seen["texts"]))]
    assert final["stop_reason"] == ending["delta"]["stop_reason"] == "end_turn"
    assert ending["usage"]["price_source"] == "list"
    assert seen["events"][:2] == ["message_start", "content_block_start"]
    assert seen["events"][2:-3] == ["content_block_delta"] * len(seen["texts"])
    assert seen["events"][-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert seen["texts"]
    if spec.provider != "demo":
        assert seen["texts"] == ["Hello", " world"]
        assert (final["usage"]["input_tokens"], final["usage"]["output_tokens"]) == (10, 2)


def check_tool(spec: Upstream, seen: Any) -> None:
    final = seen["message"]
    [block] = final["content"]
    assert (final["stop_reason"], block["type"]) == ("tool_use", "tool_use")
    assert block["name"] == "get_weather"
    assert block["id"] == (spec.tool_id or block["id"]) and block["id"]
    assert block["input"] == seen["json"][-1]  # parsed by the SDK from input_json_delta
    assert block["input"] == ({"city": "demo"} if spec.provider == "demo" else WEATHER)


def check_thinking(spec: Upstream, seen: Any) -> None:
    final = seen["message"]
    assert blocks(final) == [("thinking", "Two plus two."), ("text", "4")]
    assert final["content"][0]["signature"] == spec.signature
    assert seen["signatures"] == ([spec.signature] if spec.signature else [])
    assert (seen["thinking"], seen["texts"]) == (["Two plus two."], ["4"])


def check_conversation(spec: Upstream, seen: Any) -> None:
    assert blocks(seen["message"]) == [("text", "Sunny.")]
    assert seen["message"]["stop_reason"] == "end_turn"


def sdk_error(seen: Any, cls: str, status: int, kind: str, code: str) -> None:
    error = seen["error"]
    assert (error["class"], error["status"], error["type"]) == (cls, status, kind)
    assert cls in error["instanceOf"] and "APIError" in error["instanceOf"]
    body = error["body"]  # parsed by the SDK
    assert (body["type"], body["error"]["type"], body["error"]["code"]) == ("error", kind, code)
    assert body["error"]["message"]


def check_mid_stream(spec: Upstream, seen: Any) -> None:
    text, kind = spec.mid_stream
    assert "".join(seen["texts"]) == text and "completed" not in seen
    error = seen["error"]
    assert (error["class"], error["status"], error["type"]) == ("APIError", None, kind)
    assert (error["body"]["type"], error["body"]["error"]["type"]) == ("error", kind)
    assert error["body"]["usage"]["output_tokens"] >= 1
    assert seen["final"] == "rejected with the same error"  # finalMessage() too


CHECKS: dict[str, Callable[[Upstream, Any], None]] = {
    "create": check_create,
    "stream": check_stream,
    "tool": check_tool,
    "thinking": check_thinking,
    "conversation": check_conversation,
    "mid_stream": check_mid_stream,
}
ERRORS = {  # scenario → the SDK's class, the status, the error's type and Sluice's code
    "not_found": ("NotFoundError", 404, "not_found_error", "model_not_found"),
    "auth": ("AuthenticationError", 401, "authentication_error", "invalid_api_key"),
    "rate_limit": ("RateLimitError", 429, "rate_limit_error", "upstream_rate_limited"),
}
CASES = [(name, scenario) for name, spec in UPSTREAMS.items() for scenario in spec.scenarios]


@pytest.mark.parametrize(("upstream", "scenario"), CASES, ids=[f"{u}-{s}" for u, s in CASES])
def test_the_node_sdk_reads_it(runs: Callable[[str], Run], upstream: str, scenario: str) -> None:
    run = runs(upstream)
    seen = run.seen.get(scenario)
    assert seen is not None and "crash" not in seen, (seen, run.stderr)
    if scenario in ERRORS:
        sdk_error(seen, *ERRORS[scenario])
    else:
        CHECKS[scenario](UPSTREAMS[upstream], seen)
    for path, expected in SENT.get((upstream, scenario), []):
        [request] = run.sent[scenario]
        got = request.json()
        for step in path:
            got = got[step]
        assert got == (seen["turns"] if expected == AS_SENT else expected)


def test_missing_node_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="node is not installed"):
        node_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        node_binary()
