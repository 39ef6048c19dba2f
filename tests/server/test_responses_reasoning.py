"""Reasoning that survives the turn on the Responses door: an Anthropic upstream's signed
thinking goes out as a ``reasoning`` item's ``encrypted_content`` (streamed and whole)
and, sent back in the next turn's input as Codex sends it (``store: false``), reaches
the upstream byte for byte before the tool call it preceded. The fake upstream refuses
a tool-use turn whose signed thinking is missing or altered, as the real API does. A
tampered token, or one sealed for another account, is a 400 naming the item, with
nothing sent upstream and nothing charged."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError

from sluice.accounts.sealing import AccountSeal, UnsealableError
from sluice.core.connection import Secret
from sluice.server.lifecycle import RunningGateway
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.accounts import metered_key
from tests.support.fake_upstream import Recorded, Reply, responding
from tests.support.gateway import running_gateway

THOUGHT = "The user wants Oslo's weather; I should call the tool."
SIGNATURE = "EqQBCkYIBxgCKkB" + "x" * 40 + "=="
SHELL: Any = {
    "type": "function",
    "name": "shell",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def thinking_then_call() -> Reply:
    return Reply.stream(
        fa.message_start(30),
        fa.block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        fa.block_delta(0, {"type": "thinking_delta", "thinking": THOUGHT[:20]}),
        fa.block_delta(0, {"type": "thinking_delta", "thinking": THOUGHT[20:]}),
        fa.block_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        fa.block_stop(0),
        *fa.tool_block(1, "toolu_01", "shell", '{"command":', '"date"}'),
        *fa.message_end("tool_use", fa.usage(30, 40)),
    )


def whole_thinking_then_call() -> Reply:
    return Reply.json(
        fa.whole_message(
            {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": "UkVEQUNURUQ="},
            {"type": "tool_use", "id": "toolu_01", "name": "shell", "input": {"command": "date"}},
            stop_reason="tool_use",
        )
    )


def as_the_real_api(first: Reply) -> Callable[[Recorded], Reply]:
    """Turn one: ``first``. A later turn: 400 unless the assistant turn with the tool
    use starts with the signed thinking exactly as issued."""

    def answer(request: Recorded) -> Reply:
        messages = request.json()["messages"]
        if len(messages) == 1:
            return first
        blocks = messages[1]["content"]
        signed = {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
        if blocks[0] != signed:
            error = {"type": "invalid_request_error", "message": "thinking block invalid"}
            return Reply.json({"type": "error", "error": error}, status=400)
        if request.json().get("stream"):
            return Reply.stream(*fa.text_stream("It is Tuesday."))
        return Reply.json(fa.whole_message({"type": "text", "text": "It is Tuesday."}))

    return answer


def sdk(gw: RunningGateway, key: str | None = None) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key or gw.dev_key.key, max_retries=0)


def next_turn(output: list[Any]) -> list[Any]:
    """What Codex sends as the second turn: the first turn's items, then the result."""
    items = [item.model_dump(exclude_none=True) for item in output]
    call = next(item for item in items if item["type"] == "function_call")
    return [
        {"role": "user", "content": "What day is it?"},
        *items,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "Tue"},
    ]


async def first_turn(client: AsyncOpenAI, *, stream: bool) -> list[Any]:
    body: Any = {
        "model": "test/claude",
        "input": "What day is it?",
        "tools": [SHELL],
        "store": False,
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": 4096,
    }
    if not stream:
        return list((await client.responses.create(**body)).output)
    async with client.responses.stream(**body) as events:
        final = await events.get_final_response()
    return list(final.output)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_signed_thinking_survives_the_turn_byte_for_byte(
    tmp_path: Path, stream: bool
) -> None:
    first = thinking_then_call() if stream else whole_thinking_then_call()
    async with responding(as_the_real_api(first)) as claude:
        async with running_gateway(tmp_path, anthropic_toml(claude)) as gw, sdk(gw) as client:
            output = await first_turn(client, stream=stream)
            reasoning: Any = output[0]
            assert reasoning.type == "reasoning" and reasoning.encrypted_content
            assert THOUGHT not in reasoning.encrypted_content
            assert SIGNATURE not in reasoning.encrypted_content
            second = await client.responses.create(
                model="test/claude",
                input=next_turn(output),
                tools=[SHELL],
                store=False,
                reasoning={"effort": "low"},
                max_output_tokens=4096,
            )
    assert second.output_text == "It is Tuesday."
    sent = claude.requests[1].json()["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
    if not stream:
        assert sent[1] == {"type": "redacted_thinking", "data": "UkVEQUNURUQ="}
    assert sent[-1]["type"] == "tool_use" and sent[-1]["id"] == "toolu_01"


async def test_without_the_reasoning_item_the_upstream_refuses_the_turn(tmp_path: Path) -> None:
    async with responding(as_the_real_api(thinking_then_call())) as claude:
        async with running_gateway(tmp_path, anthropic_toml(claude)) as gw, sdk(gw) as client:
            output = await first_turn(client, stream=True)
            without = [i for i in next_turn(output) if i.get("type") != "reasoning"]
            with pytest.raises(BadRequestError):  # the fake is as strict as the real API
                await client.responses.create(
                    model="test/claude",
                    input=without,
                    tools=[SHELL],
                    store=False,
                    reasoning={"effort": "low"},
                    max_output_tokens=4096,
                )


def flipped(token: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[-1] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).decode()


@pytest.mark.parametrize("who", ["tampered", "other-account", "not-ours"])
async def test_a_token_not_sealed_for_this_account_is_a_400_naming_it(
    tmp_path: Path, who: str
) -> None:
    async with responding(as_the_real_api(thinking_then_call())) as claude:
        async with running_gateway(tmp_path, anthropic_toml(claude)) as gw:
            other = await metered_key(gw.gateway.store, "other", 10**12)
            async with sdk(gw) as client, sdk(gw, other) as theirs:
                output = await first_turn(client, stream=True)
                items = next_turn(output)
                sender = theirs if who == "other-account" else client
                if who == "tampered":
                    items[1]["encrypted_content"] = flipped(items[1]["encrypted_content"])
                elif who == "not-ours":
                    items[1]["encrypted_content"] = "gAAAAABnot-a-sluice-token"
                with pytest.raises(BadRequestError) as refused:
                    await sender.responses.create(
                        model="test/claude", input=items, tools=[SHELL], store=False
                    )
            account = await gw.gateway.store.get_account("other")
    assert refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == "input[1].encrypted_content"
    assert len(claude.requests) == 1  # the refused turn never went upstream
    assert account is not None and account.balance == 10**12


def test_the_seal_is_bound_to_its_key_and_account() -> None:
    one = AccountSeal.from_secret(Secret("k" * 44))
    same = AccountSeal.from_secret(Secret("k" * 44))
    other = AccountSeal.from_secret(Secret("j" * 44))
    token = one.seal("acct_a", b'[{"type":"thinking"}]')
    assert same.unseal("acct_a", token) == b'[{"type":"thinking"}]'  # replicas, restarts
    for opener, account in ((other, "acct_a"), (one, "acct_b")):
        with pytest.raises(UnsealableError):
            opener.unseal(account, token)
    assert one.seal("acct_a", b"x") != one.seal("acct_a", b"x")  # a fresh nonce each time
    assert json.loads(base64.urlsafe_b64decode(token)[:2].decode().join('""')) == "s1"
