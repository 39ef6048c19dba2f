"""What happened to one request: filled in by its exchange as it goes, read once when
it ends.

At the end (complete, truncated, error, stall, cancelled) it yields the charge and the
request-log row (:mod:`.record`): provider-reported usage when there is some, else an
estimate from what was streamed (docs/api.md#credits-and-cancellation: only tokens
already produced are charged after a cancel).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import msgspec

from sluice.core.money import usd_from_nano
from sluice.core.principal import Principal
from sluice.core.tally import Tally
from sluice.core.tokens import estimate_prompt_tokens, tokens_for_chars
from sluice.core.usage import Price, TokenUsage
from sluice.errors import ApiError, ShuttingDownError
from sluice.exchange.cached import hit_rate
from sluice.guardrails.rule import Note
from sluice.metering.charges import Rate, as_priced, charge, resolve_rate
from sluice.metering.meter import Ticket
from sluice.metering.pricing import priced_usage
from sluice.providers.base import ParsedCompletion, Repair, StreamTranslator
from sluice.routing.attempts import AttemptRecord
from sluice.routing.plan import Attempt, Plan
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import Usage
from sluice.wire.encode import StreamIdentity

if TYPE_CHECKING:
    from sluice.cache.flight import Flight
    from sluice.exchange.cached import CacheNote

_CUT_CODES = frozenset({"stream_incomplete", "upstream_disconnected"})


def _json_ok(text: str) -> bool:
    """Whether tool-call arguments parse as JSON (too deep to decode counts as not)."""
    try:
        msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


class ExchangeState:
    """``disconnect``: what the client leaving did (``cancel``, ``drain``; for a
    resumable stream ``resumable`` read on, ``abandoned`` when nobody came back), if it
    left."""

    __slots__ = (
        "attempt",
        "attempts",
        "cache",
        "completed",
        "completion",
        "created",
        "disconnect",
        "error",
        "first_token",
        "flight",
        "guardrails",
        "omitted_tools",
        "plan",
        "prices",
        "principal",
        "rate",
        "req",
        "request_id",
        "sent",
        "started",
        "stored",
        "ticket",
        "translator",
    )

    def __init__(
        self,
        req: ChatRequest,
        principal: Principal,
        *,
        request_id: str,
        created: int,
        started: float,
    ) -> None:
        self.req = req
        self.principal = principal
        self.request_id = request_id
        self.created = created
        self.started = started
        self.attempts: list[AttemptRecord] = []
        self.disconnect: str | None = None
        self.plan: Plan | None = None
        self.prices: Mapping[str, Price] = MappingProxyType({})
        self.ticket: Ticket | None = None
        self.attempt: Attempt | None = None
        self.rate: Rate | None = None
        self.translator: StreamTranslator | None = None
        self.completion: ParsedCompletion | None = None
        self.first_token: float | None = None
        self.sent = False  # content reached the client
        self.completed = False  # the upstream's answer arrived whole
        self.stored: str | None = None  # the id the door's memory keeps the answer under
        self.omitted_tools: list[str] = []  # the kinds of tool no upstream was sent
        self.error: ApiError | None = None
        self.guardrails: list[Note] = []  # what guardrails did, for the request log
        self.cache: CacheNote | None = None
        """What the response cache did (a model with ``cache``), else None."""
        self.flight: Flight | None = None
        """A cache miss's stream as it runs: joined by identical requests, kept at
        settlement when it qualifies."""

    def serve(self, attempt: Attempt) -> StreamIdentity:
        """The attempt that answers; its rate applies. Returns what the response says of
        it (id, model, provider, connection, route)."""
        self.attempt = attempt
        conn = attempt.target.connection
        self.rate = hit_rate(self.cache, resolve_rate(attempt.model, conn, self.prices))
        return StreamIdentity(
            id=self.request_id,
            created=self.created,
            model=attempt.target.model_id,
            provider=conn.provider,
            connection=conn.id,
            route=attempt.position,
            route_name=None if self.plan is None else self.plan.route_name,
        )

    @property
    def replaying(self) -> bool:
        """Served from the response cache (a hit)."""
        return self.cache is not None and self.cache.outcome == "hit"

    def tokens(self) -> TokenUsage | None:
        """Usage so far: the provider's, else our estimate; None before any attempt.

        A stream cut short may carry the provider's counts from its start (Anthropic
        reports one output token in ``message_start``): then what was streamed decides,
        whichever is more (docs/api.md#credits-and-cancellation: the tokens already
        produced are charged)."""
        if self.attempt is None:
            return None
        if self.translator is not None:
            reported, chars = self.translator.usage, self.translator.output_chars
        elif self.completion is not None:
            reported = self.completion.usage
            chars = sum(
                len(c.message.content or "")
                + sum(len(t.function.arguments) for t in c.message.tool_calls or ())
                for c in self.completion.choices
            )
        else:
            return None
        streamed = tokens_for_chars(chars)
        if reported is None:
            return TokenUsage(
                prompt_tokens=estimate_prompt_tokens(self.req),
                completion_tokens=streamed,
                estimated=True,
            )
        if self.completed or streamed <= reported.completion_tokens:
            return reported
        return msgspec.structs.replace(
            reported, completion_tokens=streamed, provider_cost=None, estimated=True
        )

    def wire_usage(self, *, cut: bool) -> Usage | None:
        return self.priced(self.tokens(), cut)

    def tally(self, *, cut: bool, credits: bool) -> Tally | None:
        """What the door reports: the usage so far (``cut``: priced as an estimate), and
        with ``credits`` what the account is charged."""
        tokens = self.tokens()
        usage = self.priced(tokens, cut)
        if tokens is None or usage is None:
            return None
        spent = self.credits_used() if credits else None
        return Tally(usage, tokens.cache_write_tokens, spent)

    def priced(self, tokens: TokenUsage | None, cut: bool) -> Usage | None:
        if tokens is None or self.rate is None:
            return None
        rate = self.rate
        return priced_usage(as_priced(tokens, rate), rate.price, rate.source, price_estimate=cut)

    def charge(self, tokens: TokenUsage | None) -> int:
        """What the account pays for ``tokens`` (:meth:`tokens`): their cost, never more
        than the credits held for the request (docs/metering.md)."""
        cost = 0 if tokens is None or self.rate is None else charge(tokens, self.rate)
        return cost if self.ticket is None else self.ticket.capped(cost)

    def credits_used(self) -> float | None:
        return None if self.ticket is None else usd_from_nano(self.charge(self.tokens()))

    def status(self) -> str:
        if self.disconnect is not None and self.disconnect != "resumable":
            return "cancelled"  # a resumable stream read on ends as its stream did
        if self.error is not None:
            if self.error.code == "guardrail_blocked":
                return "blocked"
            if isinstance(self.error, ShuttingDownError):
                return "shutdown"
            return "incomplete" if self.sent and self.error.code in _CUT_CODES else "error"
        reason = self.finish_reason()
        return "truncated" if reason == "length" else "complete"

    def finish_reason(self) -> str | None:
        if self.translator is not None:
            return self.translator.emitter.finish_reason
        if self.completion is not None and self.completion.choices:
            return self.completion.choices[0].finish_reason
        return None

    def repairs(self) -> list[Repair]:
        if self.translator is not None:
            return self.translator.emitter.repairs
        if self.completion is not None:
            return self.completion.repairs
        return []

    def tool_calls(self) -> list[dict[str, object]]:
        calls: list[tuple[int, int, str, str]] = []
        if self.translator is not None:
            calls = [
                (c.choice, c.index, c.name, c.arguments)
                for c in self.translator.emitter.tool_calls()
            ]
        elif self.completion is not None:
            for choice in self.completion.choices:
                for i, call in enumerate(choice.message.tool_calls or ()):
                    calls.append((choice.index, i, call.function.name, call.function.arguments))
        return [
            {"choice": c, "index": i, "name": n, "arguments_valid_json": _json_ok(a or "{}")}
            for c, i, n, a in calls
        ]
