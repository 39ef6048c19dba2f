"""What the gateway calls: the input check, the output guard of a stream, the check of a
whole answer. A thin async shell around the pure rules, for the webhooks."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.errors import ApiError
from sluice.guardrails.rule import Note, Rule, SpanRule, note_match
from sluice.guardrails.selection import RuleSet
from sluice.guardrails.stream import StreamGuard, channel_texts
from sluice.guardrails.webhook import run_webhooks
from sluice.guardrails.window import Channel
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import CompletionChoice
from sluice.wire.conversation import Message, TextPart, message_text


def _scan(spans: Sequence[SpanRule], text: str, hits: list[Rule], notes: list[Note]) -> str:
    checked = Channel(spans).feed(text, True, hits)
    for rule in hits:
        failure = note_match(notes, rule, "input")
        if failure is not None:
            raise failure
    hits.clear()
    return checked


def _checked_message(
    message: Message, spans: Sequence[SpanRule], hits: list[Rule], notes: list[Note]
) -> Message:
    content = message.content
    if isinstance(content, str):
        checked = _scan(spans, content, hits, notes)
        return message if checked == content else msgspec.structs.replace(message, content=checked)
    if isinstance(content, list):
        parts = [
            msgspec.structs.replace(p, text=_scan(spans, p.text, hits, notes))
            if isinstance(p, TextPart)
            else p
            for p in content
        ]
        if parts != content:
            return msgspec.structs.replace(message, content=parts)
    return message


async def check_input(
    req: ChatRequest, rules: RuleSet, *, request_id: str, notes: list[Note]
) -> ChatRequest:
    """Run the input guardrails on every message's text, before routing and holds.

    Block raises :class:`GuardrailBlockedError` naming the guardrail (never the text);
    redact returns the rewritten request; every match leaves a note in ``notes``.
    Webhooks see the text after redaction, as the upstream would.
    """
    if rules.spans:
        hits: list[Rule] = []
        messages = [_checked_message(m, rules.spans, hits, notes) for m in req.messages]
        if any(a is not b for a, b in zip(messages, req.messages, strict=True)):
            req = msgspec.structs.replace(req, messages=messages)
    if rules.webhooks:
        texts = [message_text(m) for m in req.messages]
        failure = await run_webhooks(
            rules.webhooks, "input", texts, request_id=request_id, notes=notes
        )
        if failure is not None:
            raise failure
    return req


class OutputGuard:
    """The output guardrails of one stream: the pure :class:`StreamGuard`, then the
    webhooks, asked once ``batch_chars`` of text waits for them (and at the end); chunks
    behind unchecked text wait with it, so the order is kept. After a failure nothing
    more goes out, not even text the webhooks have not seen yet."""

    __slots__ = (
        "_batch",
        "_guard",
        "_hooks",
        "_notes",
        "_queue",
        "_request_id",
        "_texts",
        "failure",
    )

    def __init__(self, rules: RuleSet, *, request_id: str, notes: list[Note]) -> None:
        self._guard = (
            StreamGuard(rules.spans, rules.wholes, notes) if rules.spans or rules.wholes else None
        )
        self._hooks = rules.webhooks
        self._batch = min((h.batch_chars for h in rules.webhooks), default=0)
        self._request_id, self._notes = request_id, notes
        self._queue: ChunkBatch = []
        self._texts: list[str] = []
        self.failure: ApiError | None = None

    async def filter(self, batch: ChunkBatch) -> ChunkBatch:
        """What may go out now; check :attr:`failure` after writing it."""
        if self._guard is not None:
            batch = self._guard.filter(batch)
            self.failure = self.failure or self._guard.failure
        return await self._gate(batch, final=False) if self._hooks else batch

    async def finish(self) -> ChunkBatch:
        """The held tails, checked (the upstream stream ended)."""
        out: ChunkBatch = []
        if self._guard is not None:
            out = self._guard.finish()
            self.failure = self.failure or self._guard.failure
        return await self._gate(out, final=True) if self._hooks else out

    async def _gate(self, batch: ChunkBatch, *, final: bool) -> ChunkBatch:
        if self.failure is not None:
            return []
        out: ChunkBatch = []
        for choices in batch:
            texts = [text for choice in choices for _, text in channel_texts(choice)]
            if texts or self._queue:
                self._queue.append(choices)
                self._texts.extend(texts)
            else:
                out.append(choices)
        if self._texts and (final or sum(map(len, self._texts)) >= self._batch):
            self.failure = await run_webhooks(
                self._hooks,
                "output",
                ["".join(self._texts)],
                request_id=self._request_id,
                notes=self._notes,
                final=final,
            )
            if self.failure is None:
                out.extend(self._queue)
            self._queue, self._texts = [], []
        return out


async def check_completion(
    choices: list[CompletionChoice], rules: RuleSet, *, request_id: str, notes: list[Note]
) -> list[CompletionChoice]:
    """The output guardrails on a whole (non-streamed) answer; block raises."""
    if rules.spans or rules.wholes:
        guard = StreamGuard(rules.spans, rules.wholes, notes)
        choices = guard.completion(choices)
        if guard.failure is not None:
            raise guard.failure
    if rules.webhooks:
        texts = []
        for choice in choices:
            msg = choice.message
            texts.append(msg.content if isinstance(msg.content, str) else "")
            texts.extend(c.function.arguments for c in msg.tool_calls or ())
        failure = await run_webhooks(
            rules.webhooks, "output", texts, request_id=request_id, notes=notes
        )
        if failure is not None:
            raise failure
    return choices
