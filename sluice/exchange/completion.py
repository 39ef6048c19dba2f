"""An answer read whole, checked by the output guardrails, then sent in one write.

On a ``drain`` connection the upstream call runs in a task of its own: if the client
leaves meanwhile, the answer is still awaited and charged (docs/api.md#credits-and-cancellation).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sluice.cache.whole import folded
from sluice.errors import ApiError
from sluice.exchange.heads import JSON
from sluice.exchange.state import ExchangeState
from sluice.guardrails.checks import check_completion
from sluice.guardrails.selection import RuleSet
from sluice.providers.base import ParsedCompletion
from sluice.routing.attempts import InFlight
from sluice.routing.caller import Completed
from sluice.wire.encode import StreamIdentity

if TYPE_CHECKING:
    from sluice.exchange.exchange import Exchange


async def complete(ex: Exchange, state: ExchangeState, output: RuleSet) -> None:
    plan, router, note = state.plan, ex.services.router, state.cache
    assert plan is not None
    if note is not None and note.answer is not None and note.served_as is not None:
        answer = note.answer  # a hit: the kept answer, folded
        done = Completed(note.served_as, ParsedCompletion(folded(answer.batches), answer.tokens))
    elif any(a.target.connection.on_disconnect == "drain" for a in plan.attempts):
        done = await _complete_drainable(ex, state)
    else:
        done = await router.complete(state.req, plan, state.attempts, traced=ex.traced)
    identity = _completed(state, done)
    state.first_token = ex.services.clock() - state.started
    choices = done.result.choices
    if output:  # a block raises here, before anything is sent; the tokens are charged
        choices = await check_completion(
            choices, output, request_id=state.request_id, notes=state.guardrails
        )
    tally = state.tally(cut=False, credits=True)
    assert tally is not None
    body = ex.door.completion(identity, choices, tally, state.req)
    ex.remember(state, body)
    state.sent = True
    await ex.writer.send(200, [*ex.headers, JSON], body)


def _completed(state: ExchangeState, done: Completed) -> StreamIdentity:
    identity = state.serve(done.attempt)
    state.completion = done.result
    state.completed = True
    return identity


async def _complete_drainable(ex: Exchange, state: ExchangeState) -> Completed:
    assert state.plan is not None
    in_flight = InFlight()
    router = ex.services.router
    task = asyncio.ensure_future(
        router.complete(state.req, state.plan, state.attempts, in_flight, ex.traced)
    )
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        running = in_flight.attempt
        if running is not None and running.target.connection.on_disconnect == "drain":
            in_flight.stopped = True  # that attempt finishes; no failover after it
            if ex.drain(lambda: _drain_completion(state, task)):
                raise
        task.cancel()
        task.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Future[Completed]) -> None:
    """Nobody waits for a task cancelled after its client left: mark its error seen."""
    if not task.cancelled():
        task.exception()


async def _drain_completion(state: ExchangeState, task: asyncio.Future[Completed]) -> None:
    try:
        done = await task
    except ApiError as exc:
        state.error = exc  # the router scrubbed it
        return
    _completed(state, done)
