"""What an endpoint asks an exchange to run: how it runs, and what admission reads of
it (its :class:`~sluice.core.demand.Demand`). The exchange's admit → run → settle is
the same for every kind of work, so no metered endpoint can skip the hold, the rate
limits or the request log; another kind is one more class with its own ``run``
(embeddings: :class:`~sluice.exchange.embedding.Embed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sluice.core.demand import Demand, chat_demand
from sluice.core.tokens import estimate_prompt_tokens
from sluice.exchange.completion import complete
from sluice.exchange.relay import Resumption
from sluice.exchange.state import ExchangeState
from sluice.exchange.streaming import stream
from sluice.guardrails.selection import RuleSet
from sluice.routing.capabilities import chat_needs
from sluice.wire.chat import ChatRequest

if TYPE_CHECKING:
    from sluice.exchange.exchange import Exchange


class Work(Protocol):
    def prompt_estimate(self, req: ChatRequest) -> int:
        """The prompt's tokens as the estimator guesses them (token rate limits)."""
        ...

    def demand(self, req: ChatRequest) -> Demand:
        """What ``req`` (as the credit hold sees it) may cost."""
        ...

    def needs(self, req: ChatRequest) -> frozenset[str]:
        """What the serving model must be able to do
        (:data:`~sluice.routing.capabilities.NEEDS`)."""
        ...

    async def run(self, ex: Exchange, state: ExchangeState, output: RuleSet) -> None:
        """Once admitted: the upstream call and the answer to the client."""
        ...


class _Chat:
    """What a chat request asks for, however it is answered."""

    def prompt_estimate(self, req: ChatRequest) -> int:
        return estimate_prompt_tokens(req)

    def demand(self, req: ChatRequest) -> Demand:
        return chat_demand(req)

    def needs(self, req: ChatRequest) -> frozenset[str]:
        return chat_needs(req)


class Streamed(_Chat):
    """A chat answer streamed as it comes (:mod:`.streaming`), resumable after a cut
    when it has a ``resume`` (:mod:`.relay`)."""

    __slots__ = ("resume",)

    def __init__(self, resume: Resumption | None = None) -> None:
        self.resume = resume

    async def run(self, ex: Exchange, state: ExchangeState, output: RuleSet) -> None:
        await stream(ex, state, output, self.resume)


class Whole(_Chat):
    """A chat answer read whole, then sent in one write (:mod:`.completion`)."""

    async def run(self, ex: Exchange, state: ExchangeState, output: RuleSet) -> None:
        await complete(ex, state, output)


def chat_work(req: ChatRequest, resume: Resumption | None = None) -> Work:
    """A chat-shaped request's work, as it asked: streamed (resumable with ``resume``)
    or whole."""
    return Streamed(resume) if req.is_stream else Whole()
