"""The async shell: the input check and the output guard's webhook batches (with a
scripted checker in place of the HTTP client; the real one is in tests/server)."""

from __future__ import annotations

import msgspec
import pytest

from sluice.config import GuardrailConfig
from sluice.errors import GuardrailBlockedError, GuardrailUnavailableError
from sluice.guardrails.checks import OutputGuard, check_input
from sluice.guardrails.rule import Note
from sluice.guardrails.selection import RuleSet
from sluice.guardrails.webhook import WebhookClient, WebhookRule
from sluice.wire.chat import ChatRequest
from sluice.wire.conversation import TextPart, UserMessage
from tests.guardrails.oracle import Spec
from tests.guardrails.senders import NO_WEBHOOKS
from tests.guardrails.test_stream import ROLE, STOP, content, text_chunk


class ScriptedClient(WebhookClient):
    """Answers from a list; records the texts it was asked about."""

    def __init__(self, *answers: bool | str) -> None:
        super().__init__(NO_WEBHOOKS)
        self.answers = list(answers)
        self.asked: list[list[str]] = []

    async def ask(self, url: str, body: bytes) -> bool | str:
        self.asked.append(msgspec.json.decode(body)["texts"])
        return self.answers.pop(0)


def hook(client: WebhookClient, *, fail_open: bool = False, batch_chars: int = 10) -> WebhookRule:
    conf = GuardrailConfig(
        "hook",
        "output",
        "webhook",
        url="http://127.0.0.1:9/check",
        fail_open=fail_open,
        batch_chars=batch_chars,
    )
    return WebhookRule(conf, client)


async def test_text_waits_for_its_batch_and_order_is_kept() -> None:
    client = ScriptedClient(True, True)
    guard = OutputGuard(RuleSet(webhooks=(hook(client),)), request_id="req_1", notes=[])
    assert await guard.filter([ROLE]) == [ROLE]  # no text: nothing to wait for
    assert await guard.filter([text_chunk("12345")]) == []
    out = await guard.filter([text_chunk("67890"), text_chunk("ab")])
    assert content(out) == "1234567890ab"
    assert await guard.filter([text_chunk("cd"), STOP]) == []
    tail = await guard.finish()
    assert tail == [text_chunk("cd"), STOP]
    assert client.asked == [["1234567890ab"], ["cd"]]


async def test_a_webhook_block_sticks_through_the_end_of_the_stream() -> None:
    client = ScriptedClient(False)
    notes: list[Note] = []
    rules = RuleSet(spans=(Spec("k", "redact", "zz").rule,), webhooks=(hook(client),))
    guard = OutputGuard(rules, request_id="req_1", notes=notes)
    assert await guard.filter([ROLE, text_chunk("a long enough text")]) == [ROLE]
    assert isinstance(guard.failure, GuardrailBlockedError)
    assert await guard.finish() == []
    assert isinstance(guard.failure, GuardrailBlockedError)
    assert notes == [Note("hook", "output", "block", "blocked")]


@pytest.mark.parametrize("fail_open", [False, True])
async def test_a_failing_checker(fail_open: bool) -> None:
    client = ScriptedClient("the checker could not be reached")
    notes: list[Note] = []
    rules = RuleSet(webhooks=(hook(client, fail_open=fail_open),))
    guard = OutputGuard(rules, request_id="req_1", notes=notes)
    out = await guard.filter([text_chunk("0123456789")])
    if fail_open:
        assert content(out) == "0123456789" and guard.failure is None
        assert notes[0].outcome == "failed_open"
    else:
        assert out == [] and isinstance(guard.failure, GuardrailUnavailableError)
        assert "could not be reached" in guard.failure.message
        assert notes[0].outcome == "unavailable"


async def test_check_input_redacts_each_text_part_and_blocks_by_name() -> None:
    req = ChatRequest(
        model="m",
        messages=[UserMessage([TextPart("key sk-1234"), TextPart("and sk-5678")])],
    )
    notes: list[Note] = []
    redact = RuleSet(spans=(Spec("keys", "redact", r"sk-[0-9]{4}").rule,))
    checked = await check_input(req, redact, request_id="req_1", notes=notes)
    assert checked.messages[0].content == [TextPart("key [REDACTED]"), TextPart("and [REDACTED]")]
    assert notes == [Note("keys", "input", "redact", "redacted")]
    block = RuleSet(spans=(Spec("keys", "block", r"sk-[0-9]{4}").rule,))
    with pytest.raises(GuardrailBlockedError, match="guardrail 'keys'") as info:
        await check_input(req, block, request_id="req_1", notes=[])
    assert "sk-1234" not in info.value.message
    untouched = await check_input(
        ChatRequest(model="m", messages=[UserMessage("hi")]), redact, request_id="r", notes=[]
    )
    assert untouched.messages[0].content == "hi"
