"""The semantic cache in an exchange (docs/cache.md#semantic-cache).

After an exact miss at admission, a request the semantic cache may serve
(:func:`~sluice.cache.semantic.last_turn`) has its last user turn embedded by the
cache's ``embedding_model`` on the operator's own plan for it: not an attempt of the
request, charged to no account, counted against no rate limit; its time and tokens go
to the metrics. The most similar kept answer at or above the threshold is a hit,
served as an exact hit is. A failed embedding call leaves the request a plain miss.
A miss's answer, once kept, is indexed by its vector (:func:`indexed`).
"""

from __future__ import annotations

import logging

import msgspec

from sluice.cache.semantic import Probe, VectorIndex, last_turn, semantic_key
from sluice.core.embedding import EmbedCall
from sluice.core.tokens import tokens_for_chars
from sluice.errors import ApiError
from sluice.exchange.cached import CacheNote, attempt_of, handed
from sluice.exchange.embedding import EMBEDDING_NEEDS
from sluice.exchange.services import Services
from sluice.exchange.state import ExchangeState
from sluice.routing.capabilities import capable_plan
from sluice.routing.plan import Plan

_log = logging.getLogger("sluice.cache")
TRIES = 4
"""Kept answers a lookup asks the store for, most similar first (each is a round trip
with a shared store)."""


async def similar(
    services: Services, state: ExchangeState, note: CacheNote | None
) -> CacheNote | None:
    """``note``, or for an exact miss the semantic cache allows a hit by meaning (with
    its similarity) or the miss with its probe, to index its answer once kept."""
    plan = state.plan
    semantic = None if note is None else note.config.semantic
    if note is None or note.outcome != "miss" or semantic is None or plan is None:
        return note
    if not note.reads:
        return note
    text = last_turn(state.req, semantic)
    if text is None:
        return note
    started = services.clock()
    vector, tokens = await _embedded(services, semantic.embedding_model, text)
    took = services.clock() - started
    services.metrics.cache_embedded(semantic.embedding_model, took, tokens)
    if vector is None:
        return note
    account = state.principal.account_id
    scope = account if note.config.scope == "account" else "global"
    probe = Probe(semantic_key(state.req, plan, scope, semantic), vector, round(took * 1000, 3))
    found = await _nearest(services, plan, note, probe, semantic.threshold)
    if found.outcome == "hit":  # its joiners are served what it is
        handed(note, found, services.flights)
    return found


async def _nearest(
    services: Services, plan: Plan, note: CacheNote, probe: Probe, threshold: float
) -> CacheNote:
    """A hit on the most similar kept answer at or above ``threshold`` that the plan
    still serves, of the :data:`TRIES` most similar (a vector whose answer is gone is
    forgotten; one a store out of reach cannot give now is only skipped), else the miss
    with its probe."""
    answers = services.answers
    for similarity, answer_key in services.vectors.nearest(probe, threshold)[:TRIES]:
        answer = await answers.get(answer_key)
        if answer is None:
            if answers.reachable:  # expired or evicted: it will not come back
                services.vectors.forget(probe.key, answer_key)
            continue
        attempt = attempt_of(plan, answer)
        if attempt is not None:
            found = msgspec.structs.replace(probe, similarity=round(similarity, 6))
            return CacheNote("hit", note.config, note.key, answer, attempt, probe=found)
    return msgspec.structs.replace(note, probe=probe)


async def _embedded(
    services: Services, model: str, text: str
) -> tuple[list[float], int] | tuple[None, None]:
    """``text``'s vector from ``model`` on the operator's connections, and the tokens
    it took; (None, None) when the call failed (logged)."""
    try:
        plan = capable_plan(services.tenants.shared.planner.plan(model), EMBEDDING_NEEDS)
        done = await services.router.embed(EmbedCall(texts=(text,)), plan, [])
    except ApiError as err:
        _log.warning("semantic cache: not embedded by %s (%s)", model, err.code or err.type)
        return None, None
    reported = done.result.prompt_tokens
    return done.result.vectors[0], tokens_for_chars(len(text)) if reported is None else reported


def indexed(note: CacheNote | None, vectors: VectorIndex) -> None:
    """A kept miss's answer found by its last user turn's vector from now on."""
    if note is not None and note.probe is not None and note.key is not None:
        vectors.add(note.probe, note.key)
