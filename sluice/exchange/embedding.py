"""The work of ``POST /v1/embeddings``: vectors for every input, metered like chat.

It runs through the exchange's one admit → run → settle. The exchange sees the request
as a chat request whose user messages are the texts (the door's carrier,
:func:`sluice.frontdoors.embeddings.embedding_carrier`), so the
key's allow-list, the token rate limits, the input guardrails (a block refuses, a
redaction is what the provider embeds) and the plan apply as they do to chat. The hold
is the prompt's ceiling at the model's input price (no output); the charge is the
provider's count of input tokens, or the gateway's estimate where the provider reports
none. Output guardrails have no text to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.core.demand import Demand
from sluice.core.embedding import EmbedCall
from sluice.core.tokens import MESSAGE_OVERHEAD_TOKENS, tokens_for_chars, utf8_length
from sluice.core.usage import TokenUsage
from sluice.exchange.heads import JSON
from sluice.exchange.state import ExchangeState
from sluice.guardrails.selection import RuleSet
from sluice.providers.base import ParsedCompletion
from sluice.wire.chat import ChatRequest
from sluice.wire.conversation import message_text
from sluice.wire.embeddings import EmbeddingUsage, embedding_body

EMBEDDING_NEEDS = frozenset({"embeddings"})

if TYPE_CHECKING:
    from sluice.exchange.exchange import Exchange


class Embed:
    """Embeddings of ``call``, answered as floats or base64 (``as_base64``)."""

    def __init__(self, call: EmbedCall, *, as_base64: bool) -> None:
        self._call = call
        self._as_base64 = as_base64

    def prompt_estimate(self, req: ChatRequest) -> int:
        call = self._call
        if call.tokens:
            return sum(len(t) for t in call.tokens)
        return sum(tokens_for_chars(len(message_text(m))) for m in req.messages)

    def demand(self, req: ChatRequest) -> Demand:
        """One token per UTF-8 byte of text at most (each token array's length), plus a
        few per input for a model's own markers; no output."""
        call = self._call
        if call.tokens:
            ceiling = sum(len(t) for t in call.tokens)
        else:
            ceiling = sum(utf8_length(message_text(m)) for m in req.messages)
        overhead = MESSAGE_OVERHEAD_TOKENS * call.count
        return Demand(prompt_ceiling=ceiling + overhead, output_ceiling=0)

    def needs(self, req: ChatRequest) -> frozenset[str]:
        return EMBEDDING_NEEDS

    async def run(self, ex: Exchange, state: ExchangeState, output: RuleSet) -> None:
        assert state.plan is not None
        call = self._guarded(state.req)
        done = await ex.services.router.embed(call, state.plan, state.attempts, ex.traced)
        identity = state.serve(done.attempt)
        reported = done.result.prompt_tokens
        tokens = TokenUsage(
            prompt_tokens=self.prompt_estimate(state.req) if reported is None else reported,
            estimated=reported is None,
        )
        state.completion = ParsedCompletion(choices=[], usage=tokens)
        state.completed = True
        state.first_token = ex.services.clock() - state.started
        tally = state.tally(cut=False, credits=True)
        assert tally is not None
        usage = EmbeddingUsage(
            prompt_tokens=tally.usage.prompt_tokens,
            total_tokens=tally.usage.prompt_tokens,
            cost=tally.usage.cost,
            price_source=tally.usage.price_source,
        )
        body = embedding_body(
            done.result.vectors,
            identity.model,
            usage,
            as_base64=self._as_base64,
            credits_used=tally.credits_used,
        )
        state.sent = True
        await ex.writer.send(200, [*ex.headers, JSON], body)

    def _guarded(self, req: ChatRequest) -> EmbedCall:
        """The call as the provider gets it: the texts as the input guardrails left them."""
        call = self._call
        if not call.texts:
            return call
        texts = tuple(message_text(m) for m in req.messages)
        return (
            call
            if texts == call.texts
            else EmbedCall(texts=texts, dimensions=call.dimensions, user=call.user)
        )
